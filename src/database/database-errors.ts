/**
 * Errors that the same values will always raise: SQLSTATE classes 22 (data exception, e.g. JSON
 * that jsonb refuses), 23 (integrity) and 54 (program limit, e.g. nesting too deep or an index row
 * too large). Anything else (a lost connection, a cancelled statement) is transient: retried, and
 * never blamed on the data. Takes pg errors and TypeORM's QueryFailedError (which wraps them).
 */
export function isDataError(error: unknown): boolean {
  const code = (error as { driverError?: { code?: unknown } })?.driverError?.code ?? (error as { code?: unknown })?.code;
  return typeof code === 'string' && /^(22|23|54)/.test(code);
}

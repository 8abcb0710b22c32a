/**
 * Errors that the same values will always raise: SQLSTATE classes 22 (data exception, e.g. JSON
 * that jsonb refuses), 23 (integrity) and 54 (program limit, e.g. nesting too deep or an index row
 * too large). Anything else (a lost connection, a cancelled statement) is transient: retried, and
 * never blamed on the data. Takes pg errors and TypeORM's QueryFailedError (which wraps them).
 */
export function isDataError(error: unknown): boolean {
  const code =
    (error as { driverError?: { code?: unknown } })?.driverError?.code ?? (error as { code?: unknown })?.code;
  return typeof code === 'string' && /^(22|23|54)/.test(code);
}

/**
 * Faults that may pass with time: the database unreachable or restarting (SQLSTATE class 08,
 * 57P01–57P03), out of resources (class 53, e.g. a full disk), read-only (25006), a cancelled
 * statement or a lost serialization race (57014, 40001, 40P01), and the pool's own refusals (no
 * connection within its timeout, a connection ended under a query). An API read that meets one
 * answers 503 with Retry-After, never 500.
 */
export function isTransientDatabaseError(error: unknown): boolean {
  const driver = (error as { driverError?: unknown })?.driverError ?? error;
  const code = (driver as { code?: unknown })?.code;
  if (typeof code === 'string' && /^(08|53|57P0[123]|25006|57014|40001|40P01)/.test(code)) return true;
  if (typeof code === 'string' && /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND)$/.test(code)) return true;
  const message = driver instanceof Error ? driver.message : '';
  return /timeout exceeded when trying to connect|Connection terminated|Client has encountered a connection error|Connection refused/i.test(
    message,
  );
}

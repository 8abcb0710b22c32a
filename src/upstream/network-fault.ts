/** Connect errors that prove the request never reached the server: repeating it cannot do anything twice. */
const UNSENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * A request that got no HTTP answer. `unsent`: the connection was never made; `timeout`: no whole
 * answer in time; `network`: the connection broke, perhaps after the server acted on the request.
 */
export class NetworkFault extends Error {
  constructor(
    readonly kind: 'unsent' | 'timeout' | 'network',
    readonly code: string,
  ) {
    super(kind === 'timeout' ? 'no answer in time' : `network fault (${code})`);
  }

  /** The fault behind an error thrown by fetch or by reading its body; undefined for any other error. */
  static of(error: unknown): NetworkFault | undefined {
    if (error instanceof NetworkFault) return error;
    // By name, not instanceof: fetch's errors may come from another realm (a VM context under jest).
    const { name, cause } = (error ?? {}) as { name?: unknown; cause?: unknown };
    if (name === 'TimeoutError' || name === 'AbortError') return new NetworkFault('timeout', name);
    if (name !== 'TypeError' || cause === undefined) return undefined;
    const code = codeOf(cause) ?? 'unknown';
    return new NetworkFault(UNSENT_CODES.has(code) ? 'unsent' : 'network', code);
  }
}

/** The `code` of an undici or socket error, or of the first of an AggregateError (happy eyeballs). */
function codeOf(cause: unknown): string | undefined {
  const code = (cause as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  const first = (cause as { errors?: unknown[] } | null)?.errors?.[0];
  const inner = (first as { code?: unknown } | undefined)?.code;
  return typeof inner === 'string' ? inner : undefined;
}

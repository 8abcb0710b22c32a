/** The first retry waits up to 1 s; each later one up to twice as long, never more than 1 h. */
export const BACKOFF_BASE_MS = 1000;
export const BACKOFF_CAP_MS = 60 * 60 * 1000;

/**
 * The delay before retry number `attempt` (1 = the first retry) with full jitter: a uniform draw
 * from [0, min(cap, base·2^(attempt−1))). `random` is injected (Math.random by default) so the
 * schedule is testable. A `Retry-After` (in ms) from the target wins when it asks for longer, but
 * is also held to the cap: a target cannot park a sink for days.
 */
export function backoffDelayMs(attempt: number, random: () => number = Math.random, retryAfterMs?: number): number {
  const ceiling = backoffCeilingMs(attempt);
  const jittered = Math.floor(random() * ceiling);
  if (retryAfterMs === undefined || !Number.isFinite(retryAfterMs) || retryAfterMs <= jittered) return jittered;
  return Math.min(BACKOFF_CAP_MS, Math.ceil(retryAfterMs));
}

/** The upper bound of the jitter window for retry `attempt`. */
export function backoffCeilingMs(attempt: number): number {
  const exponent = Math.max(0, Math.floor(attempt) - 1);
  if (exponent >= 32) return BACKOFF_CAP_MS;
  return Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** exponent);
}

/**
 * A `Retry-After` header value (delay-seconds or an HTTP date) in ms from `now`; undefined when
 * absent or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, now: number): number | undefined {
  if (value === null || value === undefined || value.trim() === '') return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

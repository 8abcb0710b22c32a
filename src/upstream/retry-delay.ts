import type { UpstreamTimings } from './upstream-timings.js';

const HTTP_DATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? /i;

/** Whether an answer with this status may succeed when asked again (docs/reference.md §7). */
export function isTransientStatus(status: number): boolean {
  return status === 429 || (status >= 500 && status <= 599);
}

/**
 * `Retry-After` (RFC 9110 §10.2.3) in milliseconds from now: delay-seconds or an HTTP date (a date
 * in the past is 0). Undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (!HTTP_DATE.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/**
 * The wait before retry `retry` (1 for the first): exponential backoff with full jitter, but never
 * less than the server's `Retry-After`, itself capped at `maxRetryAfterMs`.
 */
export function retryDelay(timings: UpstreamTimings, retry: number, retryAfterMs?: number): number {
  const ceiling = Math.min(timings.maxDelayMs, timings.baseDelayMs * 2 ** (retry - 1));
  const jittered = Math.floor(timings.random() * ceiling);
  if (retryAfterMs === undefined) return jittered;
  return Math.max(Math.min(retryAfterMs, timings.maxRetryAfterMs), jittered);
}

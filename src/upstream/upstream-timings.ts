/**
 * How patiently the daemon talks to the upstream: retries, backoff, timeouts, the token cache,
 * and the time and randomness they use. Injectable so tests run with millisecond backoff.
 */
export interface UpstreamTimings {
  /** Attempts per call, the first included, for 429, 5XX and network faults. */
  attempts: number;
  /** The backoff ceiling before retry n is min(maxDelayMs, baseDelayMs × 2^(n-1)), fully jittered. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** A `Retry-After` is waited for, but never longer than this. */
  maxRetryAfterMs: number;
  /** Per request, from sending to the last byte of the answer. */
  timeoutMs: number;
  /** How long an opened access token is reused without reading the connection again. */
  tokenCacheMs: number;
  now(): number;
  /** A uniform draw in [0, 1), for the jitter. */
  random(): number;
}

export const DEFAULT_UPSTREAM_TIMINGS: UpstreamTimings = {
  attempts: 4,
  baseDelayMs: 500,
  maxDelayMs: 30_000,
  maxRetryAfterMs: 60_000,
  timeoutMs: 10_000,
  tokenCacheMs: 30_000,
  now: () => Date.now(),
  random: () => Math.random(),
};

/** Provides `UpstreamTimings`. */
export const UPSTREAM_TIMINGS = Symbol('UPSTREAM_TIMINGS');

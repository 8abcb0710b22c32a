import { isTransientStatus, parseRetryAfter, retryDelay } from './retry-delay.js';
import { DEFAULT_UPSTREAM_TIMINGS } from './upstream-timings.js';
import type { UpstreamTimings } from './upstream-timings.js';

const NOW = Date.parse('2025-01-01T12:00:00Z');

function timings(random: number, overrides: Partial<UpstreamTimings> = {}): UpstreamTimings {
  return {
    ...DEFAULT_UPSTREAM_TIMINGS,
    baseDelayMs: 100,
    maxDelayMs: 1_000,
    maxRetryAfterMs: 5_000,
    random: () => random,
    ...overrides,
  };
}

describe('parseRetryAfter', () => {
  it('reads delay-seconds', () => {
    expect(parseRetryAfter('0', NOW)).toBe(0);
    expect(parseRetryAfter('1', NOW)).toBe(1_000);
    expect(parseRetryAfter(' 120 ', NOW)).toBe(120_000);
  });

  it('reads an HTTP date as the time left until it, and a past date as 0', () => {
    expect(parseRetryAfter('Wed, 01 Jan 2025 12:00:30 GMT', NOW)).toBe(30_000);
    expect(parseRetryAfter('Wednesday, 01-Jan-25 12:00:30 GMT', NOW)).toBe(30_000);
    expect(parseRetryAfter('Tue, 31 Dec 2024 23:59:59 GMT', NOW)).toBe(0);
  });

  it('ignores what is absent or unreadable', () => {
    for (const value of [
      null,
      undefined,
      '',
      '   ',
      '-1',
      '1.5',
      'soon',
      '2025-01-01T12:00:30Z',
      'Funday, 99 Foo 2025 GMT',
    ]) {
      expect(parseRetryAfter(value, NOW)).toBeUndefined();
    }
  });
});

describe('retryDelay', () => {
  it('draws uniformly below an exponentially growing ceiling (full jitter)', () => {
    expect([1, 2, 3, 4].map((retry) => retryDelay(timings(0.999999), retry))).toEqual([99, 199, 399, 799]);
    expect([1, 2, 3].map((retry) => retryDelay(timings(0.5), retry))).toEqual([50, 100, 200]);
    expect(retryDelay(timings(0), 3)).toBe(0);
  });

  it('never exceeds the maximum delay, however many retries', () => {
    for (const retry of [5, 10, 40, 2000]) {
      const delay = retryDelay(timings(0.999999), retry);
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThan(1_000);
    }
  });

  it('waits at least Retry-After, capped', () => {
    expect(retryDelay(timings(0), 1, 2_000)).toBe(2_000);
    expect(retryDelay(timings(0.999999), 4, 300)).toBe(799);
    expect(retryDelay(timings(0), 1, 3_600_000)).toBe(5_000);
    expect(retryDelay(timings(0), 1, 0)).toBe(0);
  });
});

describe('isTransientStatus', () => {
  it('is true for 429 and 5XX only', () => {
    expect([429, 500, 502, 503, 504, 599].every(isTransientStatus)).toBe(true);
    expect([200, 301, 400, 401, 403, 404, 409, 422, 428, 600].some(isTransientStatus)).toBe(false);
  });
});

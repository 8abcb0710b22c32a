import fc from 'fast-check';
import { BACKOFF_CAP_MS, backoffCeilingMs, backoffDelayMs, parseRetryAfter } from './backoff.js';

describe('backoff schedule', () => {
  it('doubles from 1 s and stops at 1 h', () => {
    expect([1, 2, 3, 4, 5, 12, 13, 50, 10_000].map(backoffCeilingMs)).toEqual([
      1000,
      2000,
      4000,
      8000,
      16000,
      2_048_000,
      BACKOFF_CAP_MS,
      BACKOFF_CAP_MS,
      BACKOFF_CAP_MS,
    ]);
  });

  it('draws uniformly below the ceiling (full jitter)', () => {
    expect(backoffDelayMs(1, () => 0)).toBe(0);
    expect(backoffDelayMs(3, () => 0.5)).toBe(2000);
    expect(backoffDelayMs(3, () => 0.999999)).toBe(3999);
    expect(backoffDelayMs(40, () => 0.5)).toBe(BACKOFF_CAP_MS / 2);
  });

  it('never leaves [0, ceiling) for any attempt and draw', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (attempt, draw) => {
          const delay = backoffDelayMs(attempt, () => draw);
          return delay >= 0 && delay < backoffCeilingMs(attempt) && Number.isInteger(delay);
        },
      ),
    );
  });

  it('honours a longer Retry-After, up to the cap, and ignores a shorter one', () => {
    expect(backoffDelayMs(1, () => 0.5, 30_000)).toBe(30_000);
    expect(backoffDelayMs(5, () => 0.5, 10)).toBe(8000);
    expect(backoffDelayMs(1, () => 0, 10 * BACKOFF_CAP_MS)).toBe(BACKOFF_CAP_MS);
  });
});

describe('Retry-After', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  it('reads delay-seconds and HTTP dates', () => {
    expect(parseRetryAfter('7', now)).toBe(7000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 00:00:05 GMT', now)).toBe(0);
  });
  it('is undefined when absent or unreadable', () => {
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    expect(parseRetryAfter('', now)).toBeUndefined();
    expect(parseRetryAfter('soon', now)).toBeUndefined();
  });
});

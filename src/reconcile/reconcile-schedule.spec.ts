import fc from 'fast-check';
import {
  dueOrder,
  JITTER,
  justMade,
  nextDueAfterFailure,
  nextDueAfterSuccess,
  phaseOf,
  placeSlots,
  priorityOf,
  RECONCILE_BUCKETS,
  RETRY_BASE_MS,
  storeBucket,
  turnAt,
  wasDown,
} from './reconcile-schedule.js';
import type { DueStore } from './reconcile-schedule.js';

const HOUR = 3_600_000;
const INTERVAL = 6 * HOUR;
const NOW = Date.UTC(2026, 11, 2, 13, 0, 0);

/** The gaps between slots on the circle of the interval. */
function gaps(slots: number[]): number[] {
  const sorted = [...slots].sort((a, b) => a - b);
  return sorted.map((slot, i) => (i + 1 < sorted.length ? sorted[i + 1] - slot : 1 - slot + sorted[0]));
}

const slot = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });
const random = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });

describe('the spread schedule', () => {
  it('given no store yet, when n stores are placed, then they are n evenly spaced slots, the first at the current phase', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 500 }), slot, (count, phase) => {
        const placed = placeSlots([], count, phase);
        expect(placed).toHaveLength(count);
        expect(placed[0]).toBeCloseTo(phase, 9);
        for (const gap of gaps(placed)) expect(gap).toBeCloseTo(1 / count, 9);
      }),
    );
  });

  it('given stores in any slots, when more are placed, then no gap of the interval is longer than 1/count, and the new come in the order of their turns', () => {
    fc.assert(
      fc.property(
        fc.array(slot, { minLength: 1, maxLength: 200 }),
        fc.integer({ min: 1, max: 300 }),
        slot,
        (taken, count, phase) => {
          const placed = placeSlots(taken, count, phase);
          expect(placed).toHaveLength(count);
          for (const value of placed) expect(value >= 0 && value < 1).toBe(true);
          expect(Math.max(...gaps([...taken, ...placed]))).toBeLessThan(1 / count + 1e-9);
          const waits = placed.map((value) => (value - phase + 1) % 1);
          expect(waits).toEqual([...waits].sort((a, b) => a - b));
        },
      ),
    );
  });

  it('given evenly spaced stores, when as many more are placed, then every store is evenly spaced again', () => {
    const taken = [0, 0.25, 0.5, 0.75];
    const placed = placeSlots(taken, 4, 0.6);
    expect([...placed].sort()).toEqual([0.125, 0.375, 0.625, 0.875]);
    // The turn coming first after the phase 0.6 is 0.625: the oldest store takes it.
    expect(placed).toEqual([0.625, 0.875, 0.125, 0.375]);
  });

  it("a slot's turn is the first time at or after the instant whose phase is the slot", () => {
    fc.assert(
      fc.property(slot, fc.integer({ min: 0, max: 10 * INTERVAL }), (value, offset) => {
        const after = NOW + offset;
        const turn = turnAt(value, after, INTERVAL);
        expect(turn).toBeGreaterThanOrEqual(after);
        expect(turn).toBeLessThan(after + INTERVAL);
        const apart = Math.abs(phaseOf(turn, INTERVAL) - value);
        expect(Math.min(apart, 1 - apart)).toBeLessThan(1e-6);
      }),
    );
  });

  it('given a store reconciled at each of its turns, then it is reconciled once per interval, give or take the jitter, never accumulated', () => {
    fc.assert(
      fc.property(slot, fc.array(random, { minLength: 2, maxLength: 40 }), (value, draws) => {
        let due = turnAt(value, NOW, INTERVAL);
        const turns = [due];
        for (const draw of draws) {
          due = nextDueAfterSuccess(value, due, INTERVAL, draw);
          turns.push(due);
        }
        for (let i = 1; i < turns.length; i++) {
          const apart = turns[i] - turns[i - 1];
          expect(apart).toBeGreaterThanOrEqual(INTERVAL * (1 - 2 * JITTER) - 1);
          expect(apart).toBeLessThanOrEqual(INTERVAL * (1 + 2 * JITTER) + 1);
        }
        // The k-th turn stays within the jitter of the slot's k-th turn: no drift.
        const last = turns.at(-1)!;
        const anchored = turns[0] + (turns.length - 1) * INTERVAL;
        expect(Math.abs(last - anchored)).toBeLessThanOrEqual(JITTER * INTERVAL + 1);
      }),
    );
  });

  it('given a store reconciled early (a priority), then its next turn is at least half an interval away', () => {
    fc.assert(
      fc.property(slot, fc.integer({ min: 0, max: INTERVAL }), random, (value, offset, draw) => {
        const at = NOW + offset;
        const next = nextDueAfterSuccess(value, at, INTERVAL, draw);
        expect(next).toBeGreaterThanOrEqual(at + INTERVAL / 2);
        expect(next).toBeLessThanOrEqual(at + 1.5 * INTERVAL + JITTER * INTERVAL);
      }),
    );
  });

  it('given 1,000 evenly placed stores, then each quarter of the interval holds a quarter of their turns, jitter and all', () => {
    const slots = placeSlots([], 1000, phaseOf(NOW, INTERVAL));
    let seed = 7;
    const draw = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const turns = slots.map((value) => nextDueAfterSuccess(value, NOW, INTERVAL, draw()));
    const quarters = [0, 1, 2, 3].map(
      (q) => turns.filter((turn) => Math.floor(phaseOf(turn, INTERVAL) * 4) === q).length,
    );
    for (const n of quarters) expect(Math.abs(n - 250)).toBeLessThanOrEqual(20);
  });

  it('given failures in a row, then the retry waits half to all of a doubling base, capped by an hour and by the interval', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        random,
        fc.constantFrom(INTERVAL, 10 * 60_000, 60_000),
        (failures, draw, interval) => {
          const ceiling = Math.min(RETRY_BASE_MS * 2 ** (failures - 1), HOUR, interval);
          const wait = nextDueAfterFailure(failures, NOW, interval, draw) - NOW;
          expect(wait).toBeGreaterThanOrEqual(ceiling / 2);
          expect(wait).toBeLessThanOrEqual(ceiling);
        },
      ),
    );
    expect([1, 2, 3, 8, 9].map((failures) => nextDueAfterFailure(failures, NOW, INTERVAL, 0.999999) - NOW)).toEqual([
      expect.closeTo(30_000, -1),
      expect.closeTo(60_000, -1),
      expect.closeTo(120_000, -1),
      expect.closeTo(3_600_000, -1),
      expect.closeTo(3_600_000, -1),
    ]);
  });

  it('orders the due stores: priorities first, then the longest due, then the longest unreconciled (never first)', () => {
    const store = fc.record({
      priority: fc.constantFrom(null, 'connection', 'silence'),
      nextDueAt: fc.integer({ min: NOW - HOUR, max: NOW }),
      lastReconciledAt: fc.option(fc.integer({ min: NOW - 2 * INTERVAL, max: NOW }), { nil: null }),
    });
    fc.assert(
      fc.property(fc.array(store, { maxLength: 50 }), (stores: DueStore[]) => {
        const sorted = [...stores].sort(dueOrder);
        const firstPlain = sorted.findIndex((item) => item.priority === null);
        if (firstPlain >= 0) expect(sorted.slice(firstPlain).every((item) => item.priority === null)).toBe(true);
        for (let i = 1; i < sorted.length; i++) {
          if ((sorted[i - 1].priority === null) !== (sorted[i].priority === null)) continue;
          expect(sorted[i - 1].nextDueAt).toBeLessThanOrEqual(sorted[i].nextDueAt);
        }
      }),
    );
    const never = { priority: null, nextDueAt: NOW, lastReconciledAt: null };
    const old = { priority: null, nextDueAt: NOW, lastReconciledAt: NOW - INTERVAL };
    expect([old, never].sort(dueOrder)).toEqual([never, old]);
  });

  describe('priorities', () => {
    const thresholds = { intervalMs: INTERVAL, silenceMs: HOUR };
    const connection = { createdAt: NOW - 10 * HOUR, subscribedAt: NOW - 9 * HOUR, lastDeliveryAt: NOW - 60_000 };
    const store = { createdAt: NOW - 9 * HOUR, lastReconciledAt: NOW - HOUR, priority: null };

    it('a store keeps its turn while its connection is heard from', () => {
      expect(priorityOf(store, connection, NOW - 1000, NOW, thresholds)).toBeNull();
    });

    it('a connection subscribed again after the store was last reconciled: its stores go first', () => {
      expect(priorityOf(store, { ...connection, subscribedAt: NOW - 30_000 }, NOW, NOW, thresholds)).toBe(
        'subscription',
      );
      // A store scheduled after that subscription (never reconciled yet) keeps its turn.
      expect(
        priorityOf(
          { ...store, lastReconciledAt: null, createdAt: NOW - 1000 },
          { ...connection, subscribedAt: NOW - 30_000 },
          NOW,
          NOW,
          thresholds,
        ),
      ).toBeNull();
    });

    it('silent for longer than the threshold while others arrive: first, once, until reconciled', () => {
      const silent = { ...connection, lastDeliveryAt: NOW - 2 * HOUR };
      const reconciledBefore = { ...store, lastReconciledAt: NOW - 1.5 * HOUR };
      expect(priorityOf(reconciledBefore, silent, NOW - 5000, NOW, thresholds)).toBe('silence');
      // Nobody's deliveries arrive either: the platform, or the night, not this connection.
      expect(priorityOf(reconciledBefore, silent, NOW - 2 * HOUR, NOW, thresholds)).toBeNull();
      // Reconciled since it went silent (at NOW - 1 h): its turn again.
      expect(
        priorityOf({ ...store, lastReconciledAt: NOW - 30 * 60_000 }, silent, NOW - 5000, NOW, thresholds),
      ).toBeNull();
      // Never any delivery: silent from the connection's making on (NOW - 10 h, so since NOW - 9 h).
      const never = { ...silent, lastDeliveryAt: null, subscribedAt: NOW - 10 * HOUR };
      expect(priorityOf({ ...store, lastReconciledAt: NOW - 9.5 * HOUR }, never, NOW - 5000, NOW, thresholds)).toBe(
        'silence',
      );
      expect(priorityOf(reconciledBefore, never, NOW - 5000, NOW, thresholds)).toBeNull();
      // A store that already goes first keeps its reason.
      expect(priorityOf({ ...reconciledBefore, priority: 'connection' }, silent, NOW, NOW, thresholds)).toBeNull();
    });

    it('a connection made within the interval is just made; the daemon was down when no process said it was alive for longer than the threshold', () => {
      expect(justMade({ ...connection, createdAt: NOW - 5000 }, NOW, thresholds)).toBe(true);
      expect(justMade(connection, NOW, thresholds)).toBe(false);
      expect(wasDown(NOW - 6 * 60_000, NOW, 5 * 60_000)).toBe(true);
      expect(wasDown(NOW - 4 * 60_000, NOW, 5 * 60_000)).toBe(false);
      expect(wasDown(null, NOW, 5 * 60_000)).toBe(false);
    });
  });

  it("a store's bucket is one of RECONCILE_BUCKETS, the same every time, and the buckets are used about evenly", () => {
    const counts = new Array<number>(RECONCILE_BUCKETS).fill(0);
    for (let store = 0; store < 6400; store++) {
      const bucket = storeBucket(1 + (store % 10), String(store));
      expect(bucket).toBe(storeBucket(1 + (store % 10), String(store)));
      counts[bucket]++;
    }
    expect(Math.min(...counts)).toBeGreaterThan(60);
    expect(Math.max(...counts)).toBeLessThan(140);
  });
});

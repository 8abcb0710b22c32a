import { LeaseView, planShare, SINK_BUCKETS, sinkLeaseKey } from './sink-shares.js';

const view = (dispatchers: number, holders: Array<[number, number]>, self = 100, olderDispatchers = 0): LeaseView => ({
  dispatchers,
  holders: new Map(holders),
  self,
  olderDispatchers,
});
const keys = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe('planShare: a sink dispatcher holds ceil(leases / dispatchers)', () => {
  it('alone, takes every free lease', () => {
    expect(planShare(keys(20), new Set(), view(1, []))).toEqual({
      share: 20,
      release: [],
      candidates: expect.arrayContaining(keys(20)),
      room: 20,
    });
  });

  it('one of three, takes at most 7 of 20, and tries only the free ones', () => {
    const others: Array<[number, number]> = keys(10).map((key) => [key, 200]);
    const plan = planShare(keys(20), new Set(), view(3, others));
    expect({ share: plan.share, room: plan.room, release: plan.release }).toEqual({ share: 7, room: 7, release: [] });
    expect([...plan.candidates].sort((a, b) => a - b)).toEqual(keys(20).slice(10));
  });

  it('when a dispatcher joins, hands on what is above the new share; at the share, does nothing', () => {
    const mine = new Set(keys(10));
    const holders: Array<[number, number]> = keys(20).map((key) => [key, key <= 10 ? 100 : 200]);
    const joined = planShare(keys(20), mine, view(3, holders));
    expect({ share: joined.share, room: joined.room, candidates: joined.candidates }).toEqual({
      share: 7,
      room: 0,
      candidates: [],
    });
    expect(joined.release).toHaveLength(3);
    expect(joined.release.every((key) => mine.has(key))).toBe(true);
    // The same leases are handed on at every look (a stable order), not others.
    expect(planShare(keys(20), mine, view(3, holders)).release).toEqual(joined.release);
    const kept = new Set([...mine].filter((key) => !joined.release.includes(key)));
    expect(planShare(keys(20), kept, view(3, holders))).toEqual({ share: 7, release: [], candidates: [], room: 0 });
  });

  it('when a dispatcher dies, takes up to the larger share of the leases it freed', () => {
    const mine = new Set(keys(7));
    const holders: Array<[number, number]> = keys(14).map((key) => [key, key <= 7 ? 100 : 300]);
    const plan = planShare(keys(20), mine, view(2, holders));
    expect({ share: plan.share, room: plan.room, release: plan.release }).toEqual({ share: 10, room: 3, release: [] });
    expect([...plan.candidates].sort((a, b) => a - b)).toEqual(keys(20).slice(14));
  });

  it('gives up the leases of sinks gone (deleted, disabled)', () => {
    expect(
      planShare(
        [1, 2],
        new Set([1, 2, 9]),
        view(1, [
          [1, 100],
          [2, 100],
          [9, 100],
        ]),
      ),
    ).toEqual({
      share: 2,
      release: [9],
      candidates: [],
      room: 0,
    });
  });

  it('dispatchers taking over together try the free leases in different orders', () => {
    const first = planShare(keys(20), new Set(), view(2, [], 101)).candidates;
    const second = planShare(keys(20), new Set(), view(2, [], 102)).candidates;
    expect(first).not.toEqual(second);
    expect([...first].sort((a, b) => a - b)).toEqual(keys(20));
  });
});

describe('planShare beside a dispatcher of an older version', () => {
  it('takes no bucket and gives up those it holds while per-sink leases are held', () => {
    const plan = planShare(keys(4), new Set([1, 2]), view(2, [[1, 100]], 100, 1));
    expect(plan).toEqual({ share: 0, release: [1, 2], candidates: [], room: 0 });
  });
});

describe('sinkLeaseKey', () => {
  it('is a bucket of 0 … SINK_BUCKETS - 1, the same for the same sink id', () => {
    const id = '0b5e2c0e-6a53-4b8e-9d56-0c5f8b1a1f00';
    expect(sinkLeaseKey(id)).toBe(sinkLeaseKey(id));
    expect(SINK_BUCKETS).toBe(1024);
    const buckets = Array.from({ length: 20_000 }, (_, i) => sinkLeaseKey(`sink-${i}`));
    expect(Math.min(...buckets)).toBe(0);
    expect(Math.max(...buckets)).toBe(SINK_BUCKETS - 1);
    // Spread evenly: 20,000 sinks give each bucket about 19.5 of them.
    const counts = new Map<number, number>();
    for (const bucket of buckets) counts.set(bucket, (counts.get(bucket) ?? 0) + 1);
    expect(counts.size).toBe(SINK_BUCKETS);
    expect(Math.max(...counts.values())).toBeLessThan(40);
  });
});

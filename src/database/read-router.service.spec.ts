import { jest } from '@jest/globals';
import type { ReadReplicaRepository } from './read-replica.repository.js';
import { ReadRouter } from './read-router.service.js';

/** A replica and a primary whose WAL positions and visibility the test sets. */
class FakeWal {
  primary = 100n;
  replayed: bigint | Error = 50n;
  sees: (transactionId: string) => boolean = () => true;
  asked: string[] = [];

  primaryWalPosition = async () => this.primary;
  replayedWalPosition = async () => {
    if (this.replayed instanceof Error) throw this.replayed;
    return this.replayed;
  };
  seesTransaction = async (transactionId: string) => {
    this.asked.push(transactionId);
    if (this.replayed instanceof Error) throw this.replayed;
    return this.sees(transactionId);
  };
}

const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5433'), { code: 'ECONNREFUSED' });

function router(wal: FakeWal, maxLagMs: number | null = 5000): ReadRouter {
  const repository = {
    primaryWalPosition: wal.primaryWalPosition,
    replayedWalPosition: wal.replayedWalPosition,
    sees: wal.seesTransaction,
  } as unknown as ReadReplicaRepository;
  return new ReadRouter(repository, maxLagMs === null ? null : { maxLagMs });
}

describe('ReadRouter', () => {
  let wal: FakeWal;
  let reads: ReadRouter;

  beforeEach(() => {
    jest.useFakeTimers({ now: 0 });
    wal = new FakeWal();
    reads = router(wal);
  });
  afterEach(() => {
    reads.onApplicationShutdown();
    jest.useRealTimers();
  });

  /** Lets the router take its next look (one second on). */
  const tick = () => jest.advanceTimersByTimeAsync(1000);

  it('without a replica sends every read to the primary, asking nothing', async () => {
    const plain = router(wal, null);
    plain.onApplicationBootstrap();
    await tick();
    expect([plain.configured, await plain.side(), await plain.side('42')]).toEqual([false, 'primary', 'primary']);
    expect(await plain.read('42', async (side) => side)).toEqual(['primary', 'primary']);
    expect(wal.asked).toEqual([]);
  });

  it('uses the replica once it has replayed a position noted here, while it lags no more than the maximum', async () => {
    reads.onApplicationBootstrap();
    await jest.advanceTimersByTimeAsync(0);
    // Reachable, but behind the first position noted: how far behind is unknown.
    expect([reads.up, reads.replicaServing, await reads.side()]).toEqual([true, false, 'primary']);
    wal.replayed = 100n;
    await tick();
    expect([reads.lagSeconds, await reads.side()]).toEqual([0, 'replica']);
    // A write at t = 2 s that the replica does not replay: its age is the lag.
    wal.primary = 200n;
    await tick();
    for (let second = 0; second < 5; second++) await tick();
    expect([reads.lagSeconds, await reads.side()]).toEqual([5, 'replica']);
    wal.primary = 300n;
    await tick();
    expect([reads.lagSeconds, await reads.side()]).toEqual([6, 'primary']);
    // Replayed up to the write of t = 2 s: the next position it lacks was noted at 8 s, 1 s ago.
    wal.replayed = 200n;
    await tick();
    expect([reads.lagSeconds, await reads.side()]).toEqual([1, 'replica']);
    wal.replayed = 300n;
    await tick();
    expect([reads.lagSeconds, await reads.side()]).toEqual([0, 'replica']);
  });

  it('sends reads to the primary while the replica does not answer, and reads again there what the replica failed', async () => {
    wal.replayed = 100n;
    reads.onApplicationBootstrap();
    await jest.advanceTimersByTimeAsync(0);
    expect(await reads.side()).toBe('replica');
    const failing = async (side: string) => {
      if (side === 'replica') throw refused;
      return 'answer';
    };
    expect(await reads.read(undefined, failing)).toEqual(['answer', 'primary']);
    expect([reads.up, await reads.side()]).toEqual([false, 'primary']);
    await tick();
    expect([reads.up, await reads.side()]).toEqual([true, 'replica']);
    wal.replayed = refused;
    await tick();
    expect([reads.up, await reads.side()]).toEqual([false, 'primary']);
    // A fault that will not pass is the read's own.
    wal.replayed = 100n;
    await tick();
    const wrong = Object.assign(new Error('syntax error'), { code: '42601' });
    await expect(reads.read(undefined, async () => Promise.reject(wrong))).rejects.toBe(wrong);
  });

  it('a read with min_cursor waits for the replica to see its transaction, else the primary serves it after 5 s', async () => {
    wal.replayed = 100n;
    reads.onApplicationBootstrap();
    await jest.advanceTimersByTimeAsync(0);
    let looks = 0;
    wal.sees = () => ++looks >= 3;
    const seen = reads.side('42');
    await jest.advanceTimersByTimeAsync(100);
    expect([await seen, wal.asked]).toEqual(['replica', ['42', '42', '42']]);
    wal.sees = () => false;
    const unseen = reads.side('43');
    await jest.advanceTimersByTimeAsync(4900);
    let answered: string | undefined;
    void unseen.then((side) => (answered = side));
    await jest.advanceTimersByTimeAsync(0);
    expect(answered).toBeUndefined();
    await jest.advanceTimersByTimeAsync(200);
    expect(answered).toBe('primary');
    // The start of the log is on every replica.
    wal.asked = [];
    expect([await reads.side('0'), wal.asked]).toEqual(['replica', []]);
  });
});

import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { isTransientDatabaseError } from './database-errors.js';
import { READ_REPLICA_OPTIONS, ReadReplicaOptions } from './read-replica.js';
import { ReadReplicaRepository } from './read-replica.repository.js';

/** Where a read is served. */
export type ReadSide = 'replica' | 'primary';

const SAMPLE_MS = 1000;
/** How long a read waits for the replica to hold its min_cursor before the primary serves it. */
const MIN_CURSOR_WAIT_MS = 5000;
/** WAL positions kept while the replica is away; past this the oldest two merge (keeping the older time: lag errs high). */
const MAX_SAMPLES = 3600;

/** The repository of `side`: its instance on the replica, or on the primary (also when there is no replica). */
export function onSide<T>(side: ReadSide, primary: T, replica: T | null): T {
  return side === 'replica' && replica !== null ? replica : primary;
}

/**
 * Sends reads to the replica (DATABASE_READ_URL) or the primary (docs/design.md, Reads from a
 * replica). Every second it notes the primary's WAL position and asks the replica how far it has
 * replayed: the lag is the age of the oldest noted position the replica has not replayed (0 when
 * it has replayed them all). Reads go to the replica once it has replayed a position noted here,
 * while it answers and lags no more than READ_REPLICA_MAX_LAG; a read that must see a change (its
 * min_cursor) waits up to 5 s for the replica to see the transaction that wrote it.
 */
@Injectable()
export class ReadRouter implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(ReadRouter.name);
  private samples: Array<{ at: number; position: bigint }> = [];
  /** Undefined until the first answer or failure. */
  private reachable?: boolean;
  private caughtUp = false;
  private lagMs = 0;
  private timer?: NodeJS.Timeout;
  private sampling = false;
  private stopped = false;

  constructor(
    private readonly wal: ReadReplicaRepository,
    @Inject(READ_REPLICA_OPTIONS) private readonly options: ReadReplicaOptions | null,
  ) {}

  /** Whether a replica is configured: answers then say which side served them. */
  get configured(): boolean {
    return this.options !== null;
  }

  get up(): boolean {
    return this.reachable === true;
  }

  get lagSeconds(): number {
    return this.lagMs / 1000;
  }

  onApplicationBootstrap(): void {
    if (this.options === null) return;
    void this.sample();
    this.timer = setInterval(() => void this.sample(), SAMPLE_MS).unref();
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /**
   * `read` on the side for a read that must see transaction `minTransactionId` (if given); when the
   * replica fails it with a fault that may pass (down, restarting, a recovery conflict), again on
   * the primary. Answers the side that served.
   */
  async read<T>(minTransactionId: string | undefined, read: (side: ReadSide) => Promise<T>): Promise<[T, ReadSide]> {
    return this.run(await this.side(minTransactionId), read);
  }

  /** `read` on `side`, and on the primary when the replica fails it as `read` does. */
  async run<T>(side: ReadSide, read: (side: ReadSide) => Promise<T>): Promise<[T, ReadSide]> {
    if (side === 'primary') return [await read('primary'), 'primary'];
    try {
      return [await read('replica'), 'replica'];
    } catch (error) {
      if (!isTransientDatabaseError(error)) throw error;
      this.lost(error);
      return [await read('primary'), 'primary'];
    }
  }

  /** The side for a read that must see transaction `minTransactionId` (if given), once the replica sees it or 5 s have passed. */
  async side(minTransactionId?: string): Promise<ReadSide> {
    if (!this.replicaServing) return 'primary';
    if (minTransactionId === undefined || minTransactionId === '0') return 'replica';
    const deadline = Date.now() + MIN_CURSOR_WAIT_MS;
    for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
      try {
        if (await this.wal.sees(minTransactionId)) return 'replica';
      } catch (error) {
        this.lost(error);
        return 'primary';
      }
      if (!this.replicaServing || Date.now() + pause > deadline) return 'primary';
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }

  /** Whether reads go to the replica now. */
  get replicaServing(): boolean {
    return this.reachable === true && this.caughtUp && this.lagMs <= (this.options?.maxLagMs ?? -1);
  }

  private lost(error: unknown): void {
    if (this.reachable !== false && !this.stopped)
      this.logger.warn({ msg: 'read replica unreachable: reads go to the primary', err: String(error) });
    this.reachable = false;
  }

  private async sample(): Promise<void> {
    if (this.sampling || this.stopped) return;
    this.sampling = true;
    try {
      await this.wal.primaryWalPosition().then(
        (position) => this.note(position),
        () => undefined, // The primary away: its own reads report it.
      );
      const replayed = await this.wal.replayedWalPosition();
      const before = this.samples.length;
      while (this.samples.length > 0 && this.samples[0].position <= replayed) this.samples.shift();
      this.caughtUp ||= this.samples.length < before;
      if (this.reachable !== true) this.logger.log({ msg: 'read replica reachable' });
      this.reachable = true;
    } catch (error) {
      this.lost(error);
    } finally {
      this.lagMs = this.samples.length === 0 ? 0 : Date.now() - this.samples[0].at;
      this.sampling = false;
    }
  }

  private note(position: bigint): void {
    if (this.samples.at(-1)?.position === position) return;
    this.samples.push({ at: Date.now(), position });
    if (this.samples.length > MAX_SAMPLES)
      this.samples.splice(0, 2, { at: this.samples[0].at, position: this.samples[1].position });
  }
}

import { BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ChannelListener } from '../database/channel-listener.js';
import { replicaOf } from '../database/read-replica.js';
import { ReadRouter } from '../database/read-router.service.js';
import { CHANGES_CHANNEL } from '../projection/published-changes.js';
import { ChangePosition } from './change.js';
import { comparePositions } from './change-cursor.js';
import { ChangeLogRepository } from './change-log.repository.js';

const POLL_MS = 1000;
const FIRST_RECHECK_MS = 25;
/** How long a reader left behind the head it was woken for waits before it reads again. */
const BEHIND_WAIT_MS = 100;

/**
 * Wakes feed readers waiting for changes and the sink dispatcher's workers, without a database
 * connection per waiter: one LISTEN connection per process (a ChannelListener, opened at the first
 * wait) hears the NOTIFY that every change-writing transaction sends on commit, from any daemon on
 * the database. A change is readable only once no
 * older transaction is open (the gap-safe rule), so after a notification the readable head is
 * re-read with a short backoff until it moves; a poll every second covers a lost connection.
 * While reads go to the replica (which cannot LISTEN), its readable head is watched too, and the
 * re-reads go on until it has caught up with the primary's.
 *
 * The readable head is not monotonic: event_log_horizon() leaves out other databases' transactions
 * by a look at pg_stat_activity taken after the snapshot, so one that ends in between holds the
 * horizon back for that statement. A reader woken for a head it then does not see would wait for
 * the next change; `isBehind` tells it to read again soon instead (docs/design.md, "Fan-out").
 */
@Injectable()
export class ChangeNotifier implements BeforeApplicationShutdown {
  private readonly logger = new Logger(ChangeNotifier.name);
  private readonly waiters = new Set<() => void>();
  /** Listeners called at every move of the readable head until they unwatch (the sink dispatcher). */
  private readonly watchers = new Set<() => void>();
  private readonly listener: ChannelListener;
  private unsubscribe?: () => void;
  private poller?: NodeJS.Timeout;
  private recheck?: NodeJS.Timeout;
  private head?: string;
  /** The primary's readable head at the last check (null: none read yet, or the log is empty). */
  private primaryHead: ChangePosition | null = null;
  /** How many times the readable head was seen to move: a reader that saw a value before its read waits only if it is unchanged. */
  private moves = 0;
  private stopped = false;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly changes: ChangeLogRepository,
    private readonly router: ReadRouter,
    @Inject(replicaOf(ChangeLogRepository)) private readonly replicaChanges: ChangeLogRepository | null,
  ) {
    this.listener = new ChannelListener(dataSource, CHANGES_CHANNEL, this.logger);
  }

  /** A mark to take before a read, for `wait`: the head moves seen so far. */
  get generation(): number {
    return this.moves;
  }

  /**
   * Resolves when the readable change log may have grown, after `ms`, or when `signal` aborts.
   * `since`: the `generation` taken before the caller's last read; if the head moved after it
   * (while the caller read), it resolves at once, so a move seen during a read is never lost.
   */
  wait(ms: number, signal?: AbortSignal, since?: number, position?: ChangePosition): Promise<void> {
    if (this.stopped || signal?.aborted || (since !== undefined && since !== this.moves)) return Promise.resolve();
    // A reader left behind a head already seen would hear of no move: it reads again soon.
    if (position !== undefined && this.isBehind(position)) ms = Math.min(ms, BEHIND_WAIT_MS);
    this.start();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * Calls `listener` whenever the readable change log may have grown, until the returned function
   * is called: the wake of a loop that runs for long, without a promise per wait.
   */
  watch(listener: () => void): () => void {
    if (this.stopped) return () => undefined;
    this.watchers.add(listener);
    this.start();
    return () => {
      this.watchers.delete(listener);
    };
  }

  /** Whether a reader at `position` is behind the primary's readable head as last read (a change it has not seen was readable). */
  isBehind(position: ChangePosition): boolean {
    return this.primaryHead !== null && comparePositions(position, this.primaryHead) < 0;
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.watchers.clear();
    clearInterval(this.poller);
    clearTimeout(this.recheck);
    for (const waiter of [...this.waiters]) waiter();
    this.unsubscribe?.();
  }

  private start(): void {
    this.poller ??= setInterval(() => {
      if (this.waiters.size > 0 || this.watchers.size > 0) void this.check();
    }, POLL_MS).unref();
    this.unsubscribe ??= this.listener.subscribe(() => this.onNotified());
  }

  private onNotified(): void {
    clearTimeout(this.recheck);
    let delay = FIRST_RECHECK_MS;
    const attempt = async () => {
      if ((await this.check()) || delay >= POLL_MS || this.stopped) return;
      delay *= 2;
      this.recheck = setTimeout(() => void attempt(), delay).unref();
    };
    void attempt();
  }

  /**
   * Reads the readable heads; wakes every waiter when one moved. True when they moved and the
   * replica's, if reads go there, is the primary's.
   */
  private async check(): Promise<boolean> {
    let settled: boolean;
    try {
      const primary = await this.changes.readableHead();
      const replica = this.router.replicaServing
        ? await this.replicaChanges?.readableHead().catch(() => undefined)
        : undefined;
      const head = `${primary} ${replica ?? ''}`;
      if (head === this.head) return false;
      this.head = head;
      this.primaryHead = headPosition(primary);
      this.moves++;
      settled = replica === undefined || replica === primary;
    } catch {
      // The database is away: waiters wake on their timeouts and report it themselves.
      return false;
    }
    for (const waiter of [...this.waiters]) waiter();
    for (const watcher of [...this.watchers]) watcher();
    return settled;
  }
}

/** `transaction id.seq` (ChangeLogRepository.readableHead) as a position; '' (no change) as null. */
function headPosition(head: string): ChangePosition | null {
  const dot = head.indexOf('.');
  return dot < 0 ? null : { transactionId: head.slice(0, dot), seq: head.slice(dot + 1) };
}

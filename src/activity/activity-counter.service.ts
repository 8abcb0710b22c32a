import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { ActivityCount, ActivityRepository } from './activity.repository.js';

/** How long counts gather in memory before one statement adds them to the history. */
const FLUSH_MS = 2000;
/** Distinct (minute, kind, key) counters kept while the database is down; beyond, the oldest are dropped. */
const MAX_PENDING = 10_000;

/** What the history counts (docs/reference.md §11): `changes` are counted by the database itself. */
export type ActivityKind = 'events' | 'deliveries' | 'failures';

/**
 * The activity counters of this process: a call adds to a counter in memory (one map entry per
 * minute, kind and key, whatever the load), and every FLUSH_MS one INSERT … ON CONFLICT adds them
 * all to `activity_minutes`, where every process's counts add up. A count not yet written when the
 * process dies is lost; nothing ever waits for one.
 */
@Injectable()
export class ActivityCounter implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(ActivityCounter.name);
  private pending = new Map<string, ActivityCount>();
  private timer?: NodeJS.Timeout;
  private flushing?: Promise<void>;

  constructor(private readonly repository: ActivityRepository) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  /** Counts `count` of `kind` (keyed by `key`: a sink kind, `webhook`) in the current minute. */
  add(kind: ActivityKind, key: string, count = 1, at = Date.now()): void {
    if (count <= 0) return;
    const minute = at - (at % 60_000);
    const id = `${minute}\u0000${kind}\u0000${key}`;
    const counter = this.pending.get(id);
    if (counter !== undefined) counter.count += count;
    else if (this.pending.size < MAX_PENDING) this.pending.set(id, { minute: new Date(minute), kind, key, count });
  }

  /** Writes what was counted before the call (a fault keeps it for the next run). */
  flush(): Promise<void> {
    this.flushing ??= (async () => {
      const counts = this.pending;
      this.pending = new Map();
      try {
        await this.repository.add([...counts.values()]);
      } catch (error) {
        for (const [id, count] of counts) {
          const counter = this.pending.get(id);
          if (counter !== undefined) counter.count += count.count;
          else if (this.pending.size < MAX_PENDING) this.pending.set(id, count);
        }
        this.logger.warn({ msg: 'activity counts not written; retrying at the next run', err: String(error) });
      } finally {
        this.flushing = undefined;
      }
    })();
    return this.flushing;
  }
}

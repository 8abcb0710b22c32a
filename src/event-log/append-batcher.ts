import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import { AppConfig } from '../config/app-config.js';
import { isDataError } from '../database/database-errors.js';
import { MetricsService } from '../observability/metrics.service.js';
import { APPEND_CONNECTIONS, EventLogRepository } from './event-log.repository.js';
import { AppendResult, NewLogEntry } from './log-entry.js';

/** Emitted after entries are committed; the projector wakes on it. */
export const LOG_APPENDED = 'event-log.appended';

/** What LOG_APPENDED carries: the head after the append and, when known, the types of the events it inserted. */
export interface LogAppended {
  head: number;
  eventTypes?: readonly string[];
}

/** Commits at once: each holds one connection of the append path's own pool. */
const MAX_IN_FLIGHT = APPEND_CONNECTIONS;
/** A second concurrent commit starts only for this many queued deliveries; fewer wait for the first. */
const SECOND_COMMIT_MIN = 8;
const MAX_BATCH = 500;
const SWEEP_MS = 100;

/** The append could not be confirmed (database down, timeout): nothing may be promised. */
export class AppendUnconfirmedError extends Error {}

/** The database refused this entry's values (a data error), so retrying will not help. */
export class AppendRejectedError extends Error {}

interface Pending {
  entry: NewLogEntry;
  enqueuedAt: bigint;
  deadline: number;
  settled: boolean;
  resolve: (result: AppendResult) => void;
  reject: (error: Error) => void;
}

/**
 * Group commit: with nothing in flight, an append commits at once (a lone delivery is never
 * delayed); while a commit is in flight, deliveries queue and the next batch takes them all. A
 * second concurrent commit starts only when enough are queued, so commits are not wasted on
 * single deliveries. No timer delays anything; one sweeping timer fails appends that outlive
 * APPEND_TIMEOUT_MS (they may still commit: a retry then gets 200 duplicate).
 */
@Injectable()
export class AppendBatcher implements OnApplicationShutdown {
  private readonly logger = new Logger(AppendBatcher.name);
  private queue: Pending[] = [];
  private readonly unsettled = new Set<Pending>();
  private inFlight = 0;
  private sweeper?: NodeJS.Timeout;
  private idle?: () => void;

  constructor(
    private readonly repository: EventLogRepository,
    private readonly config: AppConfig,
    private readonly metrics: MetricsService,
    private readonly events: EventEmitter2,
  ) {}

  append(entry: NewLogEntry): Promise<AppendResult> {
    return new Promise<AppendResult>((resolve, reject) => {
      const pending: Pending = {
        entry,
        enqueuedAt: process.hrtime.bigint(),
        deadline: Date.now() + this.config.APPEND_TIMEOUT_MS,
        settled: false,
        resolve,
        reject,
      };
      this.queue.push(pending);
      this.unsettled.add(pending);
      this.sweeper ??= setInterval(() => this.sweep(), SWEEP_MS);
      this.flush();
    });
  }

  /** Resolves once every queued append has settled. */
  async onApplicationShutdown(): Promise<void> {
    if (this.queue.length > 0 || this.inFlight > 0) await new Promise<void>((resolve) => (this.idle = resolve));
    await this.repository.close();
  }

  private flush(): void {
    while (
      this.queue.length > 0 &&
      (this.inFlight === 0 || (this.inFlight < MAX_IN_FLIGHT && this.queue.length >= SECOND_COMMIT_MIN))
    ) {
      const batch = this.queue.splice(0, MAX_BATCH);
      this.inFlight++;
      void this.commit(batch).finally(() => {
        this.inFlight--;
        this.flush();
        if (this.queue.length === 0 && this.inFlight === 0) this.idle?.();
      });
    }
  }

  private async commit(batch: Pending[]): Promise<void> {
    try {
      this.settle(batch, await this.repository.append(batch.map((pending) => pending.entry)));
    } catch (error) {
      if (!isDataError(error)) {
        this.logger.warn({ msg: 'append failed', err: error, batch: batch.length });
        for (const pending of batch) this.fail(pending, new AppendUnconfirmedError('the event log is unavailable'));
        return;
      }
      if (batch.length === 1) {
        this.fail(batch[0], new AppendRejectedError((error as Error).message));
        return;
      }
      // One bad entry fails the whole statement: commit the others one by one.
      for (const pending of batch) await this.commit([pending]);
    }
  }

  private settle(batch: Pending[], results: AppendResult[]): void {
    const now = process.hrtime.bigint();
    this.metrics.appendBatchSize.observe(batch.length);
    let head = 0;
    batch.forEach((pending, i) => {
      this.metrics.appendSeconds.observe(Number(now - pending.enqueuedAt) / 1e9);
      head = Math.max(head, results[i].position);
      if (this.done(pending)) pending.resolve(results[i]);
    });
    this.metrics.observeHead(head);
    const inserted = new Set<string>();
    batch.forEach((pending, i) => results[i].inserted && inserted.add(pending.entry.eventType));
    if (inserted.size > 0) this.events.emit(LOG_APPENDED, { head, eventTypes: [...inserted] } satisfies LogAppended);
  }

  private fail(pending: Pending, error: Error): void {
    if (this.done(pending)) pending.reject(error);
  }

  /** Marks a pending append settled; false if it already was (timed out). */
  private done(pending: Pending): boolean {
    if (pending.settled) return false;
    pending.settled = true;
    this.unsettled.delete(pending);
    if (this.unsettled.size === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
    return true;
  }

  private sweep(): void {
    const now = Date.now();
    for (const pending of this.unsettled) {
      if (pending.deadline <= now) this.fail(pending, new AppendUnconfirmedError('append not confirmed in time'));
    }
  }
}

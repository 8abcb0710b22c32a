import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import { AppConfig } from '../config/app-config.js';
import { MetricsService } from '../observability/metrics.service.js';
import { EventLogRepository } from './event-log.repository.js';
import { AppendResult, NewLogEntry } from './log-entry.js';

/** Emitted after entries are committed; the projector wakes on it. */
export const LOG_APPENDED = 'event-log.appended';

const MAX_IN_FLIGHT = 2;
const MAX_BATCH = 500;

/** The append could not be confirmed (database down, timeout): nothing may be promised. */
export class AppendUnconfirmedError extends Error {}

/** The database refused this entry's values (a data error), so retrying will not help. */
export class AppendRejectedError extends Error {}

interface Pending {
  entry: NewLogEntry;
  enqueuedAt: bigint;
  resolve: (result: AppendResult) => void;
  reject: (error: Error) => void;
}

/**
 * Group commit: an append starts a commit at once if fewer than two are in flight; otherwise it
 * waits and joins the next batch, which takes everything queued. No timer, so a lone delivery is
 * never delayed, and under load each commit carries many deliveries.
 */
@Injectable()
export class AppendBatcher implements OnApplicationShutdown {
  private readonly logger = new Logger(AppendBatcher.name);
  private queue: Pending[] = [];
  private inFlight = 0;
  private idle?: () => void;

  constructor(
    private readonly repository: EventLogRepository,
    private readonly config: AppConfig,
    private readonly metrics: MetricsService,
    private readonly events: EventEmitter2,
  ) {}

  append(entry: NewLogEntry): Promise<AppendResult> {
    const committed = new Promise<AppendResult>((resolve, reject) => {
      this.queue.push({ entry, enqueuedAt: process.hrtime.bigint(), resolve, reject });
      this.flush();
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new AppendUnconfirmedError('append not confirmed in time')), this.config.APPEND_TIMEOUT_MS);
    });
    return Promise.race([committed, timeout]).finally(() => clearTimeout(timer));
  }

  /** Resolves once every queued append has settled. */
  async onApplicationShutdown(): Promise<void> {
    if (this.queue.length === 0 && this.inFlight === 0) return;
    await new Promise<void>((resolve) => (this.idle = resolve));
  }

  private flush(): void {
    while (this.inFlight < MAX_IN_FLIGHT && this.queue.length > 0) {
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
        for (const pending of batch) pending.reject(new AppendUnconfirmedError('the event log is unavailable'));
        return;
      }
      if (batch.length === 1) {
        batch[0].reject(new AppendRejectedError((error as Error).message));
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
      pending.resolve(results[i]);
    });
    this.metrics.observeHead(head);
    if (results.some((result) => result.inserted)) this.events.emit(LOG_APPENDED, { head });
  }
}

/** SQLSTATE classes 22 (data exception) and 54 (program limit, e.g. an index row too large). */
function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('54'));
}

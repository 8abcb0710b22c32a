import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { BadRequestError } from '../../common/app-error.js';
import { PruneLoop } from '../../common/prune-loop.js';
import { AppConfig } from '../../config/app-config.js';
import { RESPONSE_HEAD_BYTES, redactSecrets } from '../redact.js';
import { SinkAttempt, SinkAttemptView, SinkAttemptsRepository } from './sink-attempts.repository.js';
import { SinkNotFoundError } from '../sinks.errors.js';

/** Attempts waiting to be written beyond this are dropped, oldest first (the database is down). */
const MAX_PENDING = 10_000;
/** Attempts per INSERT. */
const FLUSH_ROWS = 1000;
/** How long attempts gather before they are written: a sink catching up makes hundreds a second. */
const GATHER_MS = 200;
/** Pruning runs at least once a minute: attempts beyond 1,000 per sink are many in an hour. */
const PRUNE_MAX_MS = 60_000;

/** `before` cursors: base64url of `a<attempt id>`. */
const encodeBefore = (id: string) => Buffer.from(`a${id}`, 'utf8').toString('base64url');
function decodeBefore(cursor: string): string {
  const match = /^a([1-9][0-9]{0,18})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!/^[A-Za-z0-9_-]{1,32}$/.test(cursor) || !match || BigInt(match[1]) > 9223372036854775807n)
    throw new BadRequestError('before must be a next_cursor given out by this endpoint', 'before');
  return match[1];
}

/**
 * The delivery attempts of sinks (docs/reference.md §12). A worker hands each attempt over once
 * its outcome is known and goes on; the attempts are written in the background, those of a fifth
 * of a second per INSERT,
 * with what looks like a secret redacted. A record is diagnostic: one still unwritten when the
 * process dies is lost, a delivery never waits for it. Pruning (SINK_ATTEMPTS_RETENTION, 1,000 per
 * sink) is one statement per run, on a timer.
 */
@Injectable()
export class SinkAttemptsService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(SinkAttemptsService.name);
  private pending: SinkAttempt[] = [];
  private flushing?: Promise<void>;
  private readonly pruning: PruneLoop;

  constructor(
    private readonly repository: SinkAttemptsRepository,
    private readonly config: AppConfig,
  ) {
    this.pruning = new PruneLoop(
      {
        what: 'sink attempts',
        retentionMs: config.sinkAttemptsRetentionMs,
        maxIntervalMs: PRUNE_MAX_MS,
        // Every run deletes some once sinks are past 1,000 attempts: no log line for it.
        prune: async (before) => (await repository.prune(before), null),
      },
      this.logger,
    );
  }

  onApplicationBootstrap(): void {
    this.pruning.start();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.pruning.stop();
  }

  record(attempt: SinkAttempt): void {
    this.pending.push({
      ...attempt,
      error: attempt.error === null ? null : redactSecrets(attempt.error),
      response: attempt.response === null ? null : redactSecrets(attempt.response.slice(0, RESPONSE_HEAD_BYTES)),
    });
    if (this.pending.length > MAX_PENDING) this.pending.splice(0, this.pending.length - MAX_PENDING);
    this.flushing ??= this.writePending();
  }

  /** Resolves once every attempt recorded before the call is written (or given up on). */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async writePending(): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, GATHER_MS));
    try {
      while (this.pending.length > 0) {
        const rows = this.pending.splice(0, FLUSH_ROWS);
        try {
          await this.repository.insert(rows);
        } catch (error) {
          this.logger.warn({ msg: 'sink attempts could not be recorded', attempts: rows.length, err: String(error) });
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }

  /** One pruning run (PruneLoop's). */
  prune(): Promise<void> {
    return this.pruning.run();
  }

  /** A page of a sink's attempts, newest first. */
  async page(
    sinkId: string,
    query: { limit: number; before?: string },
  ): Promise<{ data: SinkAttemptView[]; next_cursor: string | null }> {
    const before = query.before === undefined ? undefined : decodeBefore(query.before);
    if (!(await this.repository.sinkExists(sinkId))) throw new SinkNotFoundError(sinkId);
    const rows = await this.repository.page(sinkId, {
      limit: query.limit,
      before,
      notBefore: new Date(Date.now() - this.config.sinkAttemptsRetentionMs),
    });
    const data = rows.slice(0, query.limit);
    return {
      data: data.map(({ id: _id, ...view }) => view),
      next_cursor: rows.length > query.limit ? encodeBefore(data[data.length - 1].id) : null,
    };
  }
}

import type { Logger } from '@nestjs/common';

/** What a PruneLoop keeps to: rows older than `retentionMs` are deleted by `prune`. */
export interface Retention {
  /** What the log lines call the rows: `audit log`, `activity history`, … */
  what: string;
  retentionMs: number;
  /** Deletes the rows older than `before`; answers how many (null: it does not tell). */
  prune(before: Date): Promise<number | null>;
  /** The longest wait between runs (10 min by default). */
  maxIntervalMs?: number;
}

const MIN_INTERVAL_MS = 1000;
const MAX_INTERVAL_MS = 10 * 60_000;

/**
 * A retention kept by deleting, at start and then every quarter of the retention (from 1 s to
 * `maxIntervalMs`), in every daemon process: a run of one finds the rows another deleted gone, and
 * deletes nothing twice. One run at a time; a fault is logged and the next run tries again.
 */
export class PruneLoop {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    private readonly retention: Retention,
    private readonly logger: Logger,
  ) {}

  start(): void {
    const longest = this.retention.maxIntervalMs ?? MAX_INTERVAL_MS;
    const interval = Math.min(longest, Math.max(MIN_INTERVAL_MS, this.retention.retentionMs / 4));
    this.timer = setInterval(() => void this.run(), interval);
    this.timer.unref();
    void this.run();
  }

  /** Stops the timer; resolves once a run in progress has ended. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One run (the one in progress, if any). */
  run(): Promise<void> {
    const { what, retentionMs } = this.retention;
    this.running ??= (async () => {
      try {
        const deleted = await this.retention.prune(new Date(Date.now() - retentionMs));
        if (deleted !== null && deleted > 0) this.logger.log({ msg: `${what} pruned`, deleted });
      } catch (error) {
        this.logger.warn({ msg: `${what} pruning failed; retrying at the next run`, err: String(error) });
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }
}

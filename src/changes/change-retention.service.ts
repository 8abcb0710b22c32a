import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { ChangeLogRepository } from './change-log.repository.js';

const MIN_INTERVAL_MS = 1000;
const MAX_INTERVAL_MS = 10 * 60_000;

/**
 * CHANGES_RETENTION (docs/reference.md §11): every change is kept that long, then only the newest of each
 * resource. Runs at start and then at a quarter of the retention (1 s to 10 min); compactions of
 * several daemons on one database serialise on their DELETE and each finds nothing left to do.
 */
@Injectable()
export class ChangeRetentionService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(ChangeRetentionService.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    private readonly changes: ChangeLogRepository,
    private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    const interval = Math.min(MAX_INTERVAL_MS, Math.max(MIN_INTERVAL_MS, this.config.changesRetentionMs / 4));
    this.timer = setInterval(() => void this.compact(), interval);
    this.timer.unref();
    void this.compact();
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One compaction; a fault is logged and the next interval tries again. */
  compact(): Promise<void> {
    this.running ??= (async () => {
      try {
        const deleted = await this.changes.compact(new Date(Date.now() - this.config.changesRetentionMs));
        if (deleted > 0) this.logger.log({ msg: 'change log compacted', deleted });
      } catch (error) {
        this.logger.warn({ msg: 'change log compaction failed; retrying at the next interval', err: String(error) });
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }
}

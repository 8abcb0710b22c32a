import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { ActivityRepository } from './activity.repository.js';

const MIN_INTERVAL_MS = 1000;
const MAX_INTERVAL_MS = 10 * 60_000;

/**
 * ACTIVITY_RETENTION (docs/reference.md §11): minutes older than that are deleted, at start and then
 * at a quarter of the retention (1 s to 10 min), in every daemon process.
 */
@Injectable()
export class ActivityRetentionService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(ActivityRetentionService.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    private readonly repository: ActivityRepository,
    private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    const interval = Math.min(MAX_INTERVAL_MS, Math.max(MIN_INTERVAL_MS, this.config.activityRetentionMs / 4));
    this.timer = setInterval(() => void this.prune(), interval);
    this.timer.unref();
    void this.prune();
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One pruning run; a fault is logged and the next run tries again. */
  prune(): Promise<void> {
    this.running ??= (async () => {
      try {
        const deleted = await this.repository.prune(new Date(Date.now() - this.config.activityRetentionMs));
        if (deleted > 0) this.logger.log({ msg: 'activity history pruned', deleted });
      } catch (error) {
        this.logger.warn({ msg: 'activity pruning failed; retrying at the next run', err: String(error) });
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }
}

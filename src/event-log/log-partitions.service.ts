import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { EventLogRepository } from './event-log.repository.js';

const INTERVAL_MS = 30_000;

/**
 * Keeps the event log's partitions ahead of the head (a partition of EVENT_LOG_PARTITION_SIZE
 * positions made once the head is within half of one of the last bound) and folds the owners'
 * counts, at start and then every INTERVAL_MS, in every process holding the `ingress` role (each
 * run is safe beside another's). An append past the last bound still makes its partition itself.
 */
@Injectable()
export class LogPartitionsService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(LogPartitionsService.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private lastBound?: number;

  constructor(
    private readonly repository: EventLogRepository,
    private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.config.hasRole('ingress')) return;
    this.timer = setInterval(() => void this.run(), INTERVAL_MS);
    this.timer.unref();
    void this.run();
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One run (the one in progress, if any). */
  run(): Promise<void> {
    this.running ??= (async () => {
      try {
        const size = this.config.EVENT_LOG_PARTITION_SIZE;
        const bound = await this.repository.extend(Math.floor(size / 2), size);
        if (this.lastBound !== undefined && bound !== this.lastBound) {
          this.logger.log({ msg: 'event log partitions made ahead', from: this.lastBound, to: bound });
        }
        this.lastBound = bound;
        await this.repository.compactOwners();
      } catch (error) {
        this.logger.warn({ msg: 'event log upkeep failed; retrying at the next run', err: String(error) });
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }
}

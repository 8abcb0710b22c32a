import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { AuditLog } from '../audit/audit-log.service.js';
import { AppConfig } from '../config/app-config.js';
import { ArchiveError, ArchiveService } from './archive.service.js';

const INTERVAL_MS = 10 * 60_000;
/** The first run waits this long after start: a starting daemon has more urgent work. */
const FIRST_RUN_MS = 60_000;

/**
 * ARCHIVE_AFTER: every INTERVAL_MS, in each process holding the `ingress` role (the one that makes
 * partitions ahead), the closed partitions whose newest entry is older than ARCHIVE_AFTER are
 * archived, those restored for an investigation left attached. Two processes side by side take turns: a run finding another in progress (its advisory
 * lock) leaves the work to it.
 */
@Injectable()
export class ArchiveScheduleService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(ArchiveScheduleService.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly config: AppConfig,
    private readonly audit: AuditLog,
  ) {}

  onApplicationBootstrap(): void {
    if (this.config.archiveAfterMs === null || !this.config.hasRole('ingress')) return;
    this.timer = setTimeout(() => {
      void this.run();
      this.timer = setInterval(() => void this.run(), INTERVAL_MS);
      this.timer.unref();
    }, FIRST_RUN_MS);
    this.timer.unref();
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearTimeout(this.timer);
    clearInterval(this.timer);
    await this.running;
  }

  /** One run (the one in progress, if any). */
  run(): Promise<void> {
    this.running ??= (async () => {
      const before = new Date(Date.now() - this.config.archiveAfterMs!);
      try {
        await new ArchiveService(this.dataSource, this.config.ARCHIVE_DIR).archive(
          { instant: before },
          (one) =>
            this.audit.record({
              actor: { id: 'daemon:archive', name: 'menu-sync (ARCHIVE_AFTER)', remoteAddress: null },
              action: 'event_log.archived',
              target: one.partition,
              detail: { file: one.file, lower: one.lower, upper: one.upper, events: one.events, bytes: one.bytes },
            }),
          { keepRestored: true },
        );
      } catch (error) {
        const level = error instanceof ArchiveError ? 'log' : 'warn';
        this.logger[level]({ msg: 'archive run stopped; the next run tries again', err: String(error) });
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }
}

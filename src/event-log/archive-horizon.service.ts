import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ListenedRefresh } from '../database/listened-refresh.js';
import { archivedAsOf, archivedPosition, Horizon } from './archive-horizon.js';
import { ArchiveHorizonRepository } from './archive-horizon.repository.js';

export const ARCHIVE_CHANNEL = 'menu_sync_archive_horizon';
/** The fallback to LISTEN: the horizon is read again this often. */
export const ARCHIVE_HORIZON_POLL_MS = 30_000;

/**
 * The archive horizon as this process last read it, read again at every change of
 * `event_log_archives` (NOTIFY on `menu_sync_archive_horizon`, migration 1767100000000) and every
 * ARCHIVE_HORIZON_POLL_MS: a read checks it in memory, so a read above the horizon costs nothing more.
 */
@Injectable()
export class ArchiveHorizonService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(ArchiveHorizonService.name);
  private readonly refresher: ListenedRefresh;
  private horizon = new Horizon([]);

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly repository: ArchiveHorizonRepository,
  ) {
    this.refresher = new ListenedRefresh(dataSource, {
      channel: ARCHIVE_CHANNEL,
      pollMs: ARCHIVE_HORIZON_POLL_MS,
      logger: this.logger,
      read: async () => {
        this.horizon = new Horizon(await this.repository.rows());
      },
      failed: `Reading the archive horizon failed; keeping the last one read, retrying every ${ARCHIVE_HORIZON_POLL_MS} ms`,
      recovered: 'Reading the archive horizon works again',
    });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.refresher.start();
  }

  onApplicationShutdown(): void {
    this.refresher.stop();
  }

  get current(): Horizon {
    return this.horizon;
  }

  /** Whether `as_of` folds the archive base too (Horizon.readsArchiveBase). */
  get archived(): boolean {
    return this.horizon.readsArchiveBase;
  }

  /** Throws the 410 of an archived position (one the log no longer holds); `found` reads skip this. */
  checkPosition(position: number): void {
    const across = this.horizon.ofPosition(position);
    if (across !== undefined) throw archivedPosition(position, across);
  }

  /** Throws the 410 of an `as_of` older than the horizon. */
  checkAsOf(asOf: Date | undefined): void {
    if (asOf === undefined) return;
    const across = this.horizon.ofAsOf(asOf);
    if (across !== undefined) throw archivedAsOf(asOf, across);
  }

  /** Reads the horizon again now (a read already under way is followed by another). */
  refresh(): Promise<void> {
    return this.refresher.refresh();
  }
}

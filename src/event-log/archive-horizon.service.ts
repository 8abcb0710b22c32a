import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ChannelListener } from '../database/channel-listener.js';
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
  private readonly listener: ChannelListener;
  private horizon = new Horizon([]);
  private reading: Promise<void> | null = null;
  private again = false;
  private timer?: NodeJS.Timeout;
  private unlisten: (() => void) | null = null;
  private failing = false;
  private stopped = false;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly repository: ArchiveHorizonRepository,
  ) {
    this.listener = new ChannelListener(dataSource, ARCHIVE_CHANNEL, this.logger);
  }

  async onApplicationBootstrap(): Promise<void> {
    this.unlisten = this.listener.subscribe(() => void this.refresh());
    this.timer = setInterval(() => void this.refresh(), ARCHIVE_HORIZON_POLL_MS).unref();
    await this.refresh();
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.unlisten?.();
    this.unlisten = null;
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
    if (this.stopped) return Promise.resolve();
    if (this.reading !== null) {
      this.again = true;
      return this.reading;
    }
    this.reading = (async () => {
      do {
        this.again = false;
        try {
          this.horizon = new Horizon(await this.repository.rows());
          if (this.failing) this.logger.log('Reading the archive horizon works again');
          this.failing = false;
        } catch (error) {
          if (!this.failing && !this.stopped)
            this.logger.warn({
              msg: `Reading the archive horizon failed; keeping the last one read, retrying every ${ARCHIVE_HORIZON_POLL_MS} ms`,
              err: String(error),
            });
          this.failing = true;
          return;
        }
      } while (this.again);
    })().finally(() => {
      this.reading = null;
    });
    return this.reading;
  }
}

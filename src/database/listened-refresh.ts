import type { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { ChannelListener } from './channel-listener.js';

/** What a ListenedRefresh reads, and how it speaks of a failed read. */
export interface ListenedRefreshOptions {
  channel: string;
  /** The fallback to LISTEN: read again this often. */
  pollMs: number;
  logger: Logger;
  /** Reads the state again and keeps it; a throw keeps the last state read. */
  read(): Promise<void>;
  /** The warning logged once per outage, and the line logged when reading works again. */
  failed: string;
  recovered: string;
}

/**
 * State a process keeps in memory from the database: read at the start, again at every NOTIFY on
 * `channel` (a ChannelListener) and every `pollMs` as the fallback. Reads are coalesced (one at a
 * time; a refresh asked meanwhile reads once more after it), and a failing read is told once per
 * outage, not at every poll.
 */
export class ListenedRefresh {
  private readonly listener: ChannelListener;
  private reading: Promise<void> | null = null;
  private again = false;
  private timer?: NodeJS.Timeout;
  private unlisten: (() => void) | null = null;
  private failing = false;
  private stopped = false;

  constructor(
    dataSource: DataSource,
    private readonly options: ListenedRefreshOptions,
  ) {
    this.listener = new ChannelListener(dataSource, options.channel, options.logger);
  }

  async start(): Promise<void> {
    this.unlisten = this.listener.subscribe(() => void this.refresh());
    this.timer = setInterval(() => void this.refresh(), this.options.pollMs).unref();
    await this.refresh();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.unlisten?.();
    this.unlisten = null;
  }

  /** Reads again now (a read already under way is followed by another). */
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
          await this.options.read();
          if (this.failing) this.options.logger.log(this.options.recovered);
          this.failing = false;
        } catch (error) {
          if (!this.failing && !this.stopped)
            this.options.logger.warn({ msg: this.options.failed, err: String(error) });
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

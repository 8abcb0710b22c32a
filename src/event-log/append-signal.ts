import { Injectable, Logger } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { LOG_APPENDED, type LogAppended } from './append-batcher.js';

/** NOTIFYed after appends committed in a process where no projector projects: the projector elsewhere wakes on it. */
export const APPENDED_CHANNEL = 'menu_sync_appended';

/**
 * Tells a projector in another process that the log grew. In the process that projects, the lanes
 * wake on LOG_APPENDED (in memory) and nothing is sent; anywhere else (a process without the
 * projector role, or one whose projector stands by) each append is followed by a NOTIFY, without
 * which the projector would hear of it only at its one-second poll. Sends are coalesced: while
 * one is under way, the appends after it get one more when it ends, never none.
 */
@Injectable()
export class AppendSignal {
  private readonly logger = new Logger(AppendSignal.name);
  /** Set by the projector while its lanes run in this process. */
  projectingHere = false;
  private sending = false;
  /** The event types appended since the last send began; null: some append did not say (the projector wakes every lane). */
  private pending: Set<string> | null = new Set();

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  @OnEvent(LOG_APPENDED)
  onAppended(appended?: LogAppended): void {
    if (this.projectingHere) return;
    const types = appended?.eventTypes;
    if (types === undefined) this.pending = null;
    else for (const type of types) this.pending?.add(type);
    if (!this.sending) this.send();
  }

  private send(): void {
    this.sending = true;
    const payload = this.pending === null ? '' : [...this.pending].join(',');
    this.pending = new Set();
    this.dataSource
      .query(`SELECT pg_notify($1, $2)`, [APPENDED_CHANNEL, payload])
      .catch((error) =>
        // The projector's poll still finds the appends: late by up to a second, not lost.
        this.logger.warn({ msg: 'could not notify the projector of appends', err: String(error) }),
      )
      .finally(() => {
        this.sending = false;
        if (this.pending === null || this.pending.size > 0) this.send();
      });
  }
}

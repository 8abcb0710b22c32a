import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AdvisoryLock, pgLocksMatch } from '../database/advisory-locks.js';
import type { LogCheckpoint } from '../event-log/log-entry.js';
import type { ProjectionDefinition } from './projection-definitions.js';

export interface ProjectionStatus {
  checkpoint: LogCheckpoint;
  applied: number;
  parked: number;
  lastError: string | null;
}

/** Where each projection stands: its checkpoint, what it parked, its lag behind the log, whether a projector runs. */
@Injectable()
export class ProjectionStatusRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Whether some session on this database holds the session advisory lock `key` (as ProjectorService takes it). */
  async advisoryLockHeld(lock: AdvisoryLock): Promise<boolean> {
    const [match, params] = pgLocksMatch(lock);
    const [{ held }] = await this.dataSource.query(
      `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                        WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted
                          AND ${match}) AS held`,
      params,
    );
    return held;
  }

  async status(projection: ProjectionDefinition): Promise<ProjectionStatus> {
    const [row] = await this.dataSource.query(
      `SELECT c.transaction_id::text AS transaction_id, c.position::text AS position, c.applied::text AS applied,
              (SELECT count(*) FROM ${projection.schema}.parked_events)::int AS parked,
              (SELECT error FROM ${projection.schema}.parked_events ORDER BY parked_at DESC, position DESC LIMIT 1) AS last_error
         FROM ${projection.schema}.checkpoint c`,
    );
    return {
      checkpoint: { transactionId: row.transaction_id, position: row.position },
      applied: Number(row.applied),
      parked: row.parked,
      lastError: row.last_error,
    };
  }

  /** The parked entries of a projection, newest first. */
  async parked(
    projection: ProjectionDefinition,
    limit: number,
  ): Promise<Array<{ position: number; eventId: string; error: string; parkedAt: Date }>> {
    const rows: Array<{ position: string; event_id: string; error: string; parked_at: Date }> =
      await this.dataSource.query(
        `SELECT p.position::text AS position, p.event_id, p.error, p.parked_at FROM ${projection.schema}.parked_events p
        ORDER BY p.position DESC LIMIT $1`,
        [limit],
      );
    return rows.map((row) => ({
      position: Number(row.position),
      eventId: row.event_id,
      error: row.error,
      parkedAt: row.parked_at,
    }));
  }

  /** Log entries not yet read by a reader at `checkpoint`. */
  async lag(checkpoint: LogCheckpoint): Promise<number> {
    const [row] = await this.dataSource.query(
      `SELECT count(*)::int AS lag FROM event_log WHERE (transaction_id, position) > ($1::xid8, $2::bigint)`,
      [checkpoint.transactionId, checkpoint.position],
    );
    return row.lag;
  }
}

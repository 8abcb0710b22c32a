import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

/** One delivery attempt as recorded (docs/reference.md §12). */
export interface SinkAttempt {
  sinkId: string;
  at: Date;
  firstSeq: number | null;
  lastSeq: number | null;
  changes: number;
  webhookId: string | null;
  outcome: 'ok' | 'retry' | 'disabled';
  status: number | string;
  durationMs: number;
  error: string | null;
  response: string | null;
}

/** The attempt as `GET /api/v1/sinks/{id}/attempts` shows it. */
export interface SinkAttemptView {
  at: string;
  batch: { first_seq: number | null; last_seq: number | null; changes: number };
  webhook_id: string | null;
  outcome: SinkAttempt['outcome'];
  status: number | string;
  duration_ms: number;
  error: string | null;
  response: string | null;
}

interface AttemptRow {
  id: string;
  at: Date;
  first_seq: string | null;
  last_seq: string | null;
  changes: number;
  webhook_id: string | null;
  outcome: SinkAttempt['outcome'];
  status: number | string;
  duration_ms: number;
  error: string | null;
  response: string | null;
}

/** At most this many attempts are kept per sink. */
export const ATTEMPTS_PER_SINK = 1000;

/**
 * The id below which a sink's attempts are beyond the newest `$keep` (null: fewer than that):
 * the one bound both the pages and the pruning use, read from the (sink_id, id DESC) index.
 */
const keepFrom = (sink: string, keep: string) =>
  `(SELECT b.id FROM menu_sync_sink_attempts b WHERE b.sink_id = ${sink} ORDER BY b.id DESC OFFSET ${keep} - 1 LIMIT 1)`;

@Injectable()
export class SinkAttemptsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** One statement for many attempts; those of sinks deleted meanwhile are left out. */
  async insert(attempts: readonly SinkAttempt[]): Promise<void> {
    if (attempts.length === 0) return;
    const column = <T>(pick: (attempt: SinkAttempt) => T) => attempts.map(pick);
    await this.dataSource.query(
      `INSERT INTO menu_sync_sink_attempts
         (sink_id, at, first_seq, last_seq, changes, webhook_id, outcome, status, duration_ms, error, response)
       SELECT a.sink_id, a.at, a.first_seq, a.last_seq, a.changes, a.webhook_id, a.outcome, a.status, a.duration_ms,
              a.error, a.response
         FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[], $4::bigint[], $5::int[], $6::text[],
                     $7::text[], $8::jsonb[], $9::int[], $10::text[], $11::text[]) WITH ORDINALITY
              AS a (sink_id, at, first_seq, last_seq, changes, webhook_id, outcome, status, duration_ms, error, response, n)
        WHERE EXISTS (SELECT 1 FROM sinks s WHERE s.id = a.sink_id)
        ORDER BY a.n`,
      [
        column((a) => a.sinkId),
        column((a) => a.at.toISOString()),
        column((a) => a.firstSeq),
        column((a) => a.lastSeq),
        column((a) => a.changes),
        column((a) => a.webhookId),
        column((a) => a.outcome),
        column((a) => JSON.stringify(a.status)),
        column((a) => Math.round(a.durationMs)),
        column((a) => a.error),
        column((a) => a.response),
      ],
    );
  }

  async sinkExists(sinkId: string): Promise<boolean> {
    const [row]: Array<{ exists: boolean }> = await this.dataSource.query(
      `SELECT EXISTS (SELECT 1 FROM sinks WHERE id = $1) AS exists`,
      [sinkId],
    );
    return row.exists;
  }

  /**
   * A sink's attempts newest first, those with an id below `before` (absent: from the newest);
   * what the next prune will delete (too old, beyond the newest 1,000) is already left out.
   * Answers `limit + 1` rows at most, so the caller knows whether a next page exists.
   */
  async page(
    sinkId: string,
    options: { limit: number; before?: string; notBefore: Date },
  ): Promise<Array<SinkAttemptView & { id: string }>> {
    const rows: AttemptRow[] = await this.dataSource.query(
      `SELECT a.id::text AS id, a.at, a.first_seq::text AS first_seq, a.last_seq::text AS last_seq, a.changes,
              a.webhook_id, a.outcome, a.status, a.duration_ms, a.error, a.response
         FROM menu_sync_sink_attempts a
        WHERE a.sink_id = $1 AND a.at >= $2 AND ($3::bigint IS NULL OR a.id < $3::bigint)
          AND a.id >= coalesce(${keepFrom('$1', '$5::int')}, 0)
        ORDER BY a.id DESC LIMIT $4`,
      [sinkId, options.notBefore, options.before ?? null, options.limit + 1, ATTEMPTS_PER_SINK],
    );
    return rows.map((row) => ({
      id: row.id,
      at: row.at.toISOString(),
      batch: {
        first_seq: row.first_seq === null ? null : Number(row.first_seq),
        last_seq: row.last_seq === null ? null : Number(row.last_seq),
        changes: row.changes,
      },
      webhook_id: row.webhook_id,
      outcome: row.outcome,
      status: row.status,
      duration_ms: row.duration_ms,
      error: row.error,
      response: row.response,
    }));
  }

  /**
   * Deletes, in one statement, every attempt older than `olderThan` and every one beyond the
   * newest `keep` of its sink. Answers how many it deleted. Each sink's bound is found once
   * (MATERIALIZED): inlined, the planner evaluated it for every attempt it joined, and pruning the
   * attempts of a sink that had caught up on a million changes took 14 s, holding a transaction id
   * all along, so event_log_horizon() held the projector and every sink back meanwhile.
   */
  async prune(olderThan: Date, keep = ATTEMPTS_PER_SINK): Promise<number> {
    const [row]: Array<{ deleted: number }> = await this.dataSource.query(
      `WITH bound AS MATERIALIZED (SELECT s.id AS sink_id, ${keepFrom('s.id', '$2::int')} AS keep_from FROM sinks s),
       deleted AS (
         DELETE FROM menu_sync_sink_attempts a
          USING bound
          WHERE a.sink_id = bound.sink_id AND (a.at < $1 OR a.id < bound.keep_from)
         RETURNING 1)
       SELECT count(*)::int AS deleted FROM deleted`,
      [olderThan, keep],
    );
    return row.deleted;
  }
}

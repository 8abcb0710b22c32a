import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { SecretCipher } from '../common/secret-cipher.js';
import type { ChangePosition } from '../changes/change.js';
import { LazyPool, preparedQuery, SqlSession } from '../database/postgres-connection.js';
import type { SinkCount } from '../observability/sink-series.js';
import type { Sink, SinkFailure, SinkKind, TableLayout } from './sink.js';
import { aad, RETURNING, SELECT, sinkOfRow, SinkRow } from './sink-rows.js';
import { inSnapshot, SinkFrom, startSink } from './sink-start.js';

export interface NewSink {
  id: string;
  kind: SinkKind;
  url: string | null;
  /** postgres, mysql: the URL with its password, sealed here; `url` is then the masked one. */
  targetUrl?: string | null;
  schema?: string | null;
  tablePrefix?: string | null;
  layout?: TableLayout | null;
  stream: string | null;
  subjectPrefix: string | null;
  types: string[] | null;
  ownerIds: string[] | null;
  batchSize: number;
  timeoutMs: number;
  secret: string | null;
  /** Where it starts; `defaultTypes`: what it follows when `types` is null. */
  from: SinkFrom;
  defaultTypes: readonly string[];
}

export interface SinkChanges {
  url?: string;
  /** postgres, mysql: the new target URL (sealed), `url` being its masked form. */
  targetUrl?: string;
  types?: string[] | null;
  ownerIds?: string[] | null;
  batchSize?: number;
  timeoutMs?: number;
  /** Re-enables (`active`) or disables a sink; enabling clears its backoff. */
  state?: 'active' | 'disabled';
}

const pos = (position: ChangePosition) => [position.transactionId, position.seq];
/** What a success sets: the cursor at ($4, $5), the backoff cleared; $6: whether a batch was delivered. */
const SUCCESS = `cursor_xid = $4, cursor_seq = $5, inflight_xid = NULL, inflight_seq = NULL, attempts = 0,
  next_attempt_at = NULL, failing_since = NULL, last_error = NULL,
  last_success_at = CASE WHEN $6 THEN now() ELSE last_success_at END,
  state = CASE WHEN state = 'disabled' THEN state ELSE 'active' END`;

/** The columns a sink's own delivery writes: left out of its stamp (deliverable). */
const DELIVERY_COLUMNS = [
  'cursor_xid',
  'cursor_seq',
  'inflight_xid',
  'inflight_seq',
  'attempts',
  'next_attempt_at',
  'failing_since',
  'last_error',
  'last_success_at',
  'state',
  'snapshot_xid',
  'snapshot_seq',
];

/** A sink's cursor (or its batch in flight) to move from `from` to `to`, compare-and-set. */
export interface CursorMove {
  id: string;
  from: ChangePosition;
  to: ChangePosition;
}

/** The columns of CursorMove as the arrays `unnest` takes. */
const unnested = (moves: readonly CursorMove[]) => [
  moves.map((move) => move.id),
  moves.map((move) => move.from.transactionId),
  moves.map((move) => move.from.seq),
  moves.map((move) => move.to.transactionId),
  moves.map((move) => move.to.seq),
];

/** Sinks with their secrets sealed at rest (sealed here, opened by sinkOfRow): what creates, changes and delivers them writes here; SinkListing lists them. */
@Injectable()
export class SinkRepository implements OnApplicationShutdown {
  /**
   * The cursor moves of sinks catching up, on sessions that commit without waiting for the WAL to
   * reach the disk (`synchronous_commit`): a move lost to a crash of PostgreSQL sends its batches
   * again under the same webhook-ids, which at-least-once allows, and the next batch does not wait
   * for a flush per batch.
   */
  private readonly cursorMoves: LazyPool;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly cipher: SecretCipher,
  ) {
    this.cursorMoves = new LazyPool(
      dataSource,
      { application_name: 'menu-sync sink cursors', max: 2 },
      { synchronous_commit: 'off' },
    );
  }

  /** Ends the cursor moves' pool (Nest calls this hook last, after the sink workers stopped). */
  async onApplicationShutdown(): Promise<void> {
    await this.cursorMoves.end();
  }

  /** The new sink, started from `from` in the same transaction (so no delivery starts anywhere else). */
  async create(input: NewSink): Promise<Sink> {
    return this.dataSource.transaction(async (manager) => {
      await this.insert(manager, input);
      await startSink(manager, input.id, input.from, input.types ?? input.defaultTypes, input.ownerIds);
      const [row]: SinkRow[] = await manager.query(`${SELECT} WHERE id = $1`, [input.id]);
      return sinkOfRow(this.cipher, row);
    });
  }

  private async insert(db: SqlSession, input: NewSink): Promise<void> {
    await db.query(
      `INSERT INTO sinks (id, kind, url, stream, subject_prefix, types, owner_ids, batch_size, timeout_ms, secret,
                          url_sealed, schema, table_prefix, layout)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
      [
        input.id,
        input.kind,
        input.url,
        input.stream,
        input.subjectPrefix,
        input.types,
        input.ownerIds,
        input.batchSize,
        input.timeoutMs,
        input.secret === null ? null : this.cipher.seal(input.secret, aad(input.id, 'secret')),
        input.targetUrl == null ? null : this.cipher.seal(input.targetUrl, aad(input.id, 'url')),
        input.schema ?? null,
        input.tablePrefix ?? null,
        input.layout ?? null,
      ],
    );
  }

  async find(id: string): Promise<Sink | null> {
    const [row] = await this.dataSource.query(`${SELECT} WHERE id = $1`, [id]);
    return row === undefined ? null : sinkOfRow(this.cipher, row);
  }

  /**
   * The sinks a dispatcher delivers (all but the disabled ones), each with a stamp of its settings:
   * a digest of the row without the columns its own delivery writes (cursor, batch in flight,
   * attempts, state, snapshot walk). It changes with any change of a setting, whoever wrote it, and
   * with a replay (epoch), never with a delivery.
   */
  async deliverable(): Promise<Array<{ id: string; stamp: string }>> {
    return this.dataSource.query(
      `SELECT id, md5((to_jsonb(s) - $1::text[])::text) AS stamp FROM sinks s WHERE state <> 'disabled' ORDER BY id`,
      [DELIVERY_COLUMNS],
    );
  }

  /** `deliverable` of the sinks of `ids` that still are (a sink removed or disabled is not among them). */
  async deliverableOf(ids: readonly string[]): Promise<Array<{ id: string; stamp: string }>> {
    return this.dataSource.query(
      `SELECT id, md5((to_jsonb(s) - $1::text[])::text) AS stamp FROM sinks s WHERE state <> 'disabled' AND id = ANY($2::uuid[])`,
      [DELIVERY_COLUMNS, [...ids]],
    );
  }

  async update(id: string, changes: SinkChanges): Promise<Sink | null> {
    const [rows] = await this.dataSource.query(
      `UPDATE sinks SET
         url = COALESCE($2, url),
         types = CASE WHEN $3::boolean THEN $4::text[] ELSE types END,
         owner_ids = CASE WHEN $5::boolean THEN $6::text[] ELSE owner_ids END,
         batch_size = COALESCE($7, batch_size),
         timeout_ms = COALESCE($8, timeout_ms),
         state = COALESCE($9, state),
         url_sealed = COALESCE($10, url_sealed),
         attempts = CASE WHEN $9 = 'active' THEN 0 ELSE attempts END,
         next_attempt_at = CASE WHEN $9 = 'active' THEN NULL ELSE next_attempt_at END,
         failing_since = CASE WHEN $9 = 'active' THEN NULL ELSE failing_since END,
         updated_at = now()
       WHERE id = $1 ${RETURNING}`,
      [
        id,
        changes.url ?? null,
        changes.types !== undefined,
        changes.types ?? null,
        changes.ownerIds !== undefined,
        changes.ownerIds ?? null,
        changes.batchSize ?? null,
        changes.timeoutMs ?? null,
        changes.state ?? null,
        changes.targetUrl === undefined ? null : this.cipher.seal(changes.targetUrl, aad(id, 'url')),
      ],
    );
    return rows[0] === undefined ? null : sinkOfRow(this.cipher, rows[0]);
  }

  async delete(id: string): Promise<boolean> {
    const [, count] = await this.dataSource.query(`DELETE FROM sinks WHERE id = $1`, [id]);
    return count > 0;
  }

  /** Starts the sink again from `from` (see startSink); `types`: what it follows when it names none. */
  async replay(id: string, from: SinkFrom, defaultTypes: readonly string[]): Promise<Sink | null> {
    return this.dataSource.transaction(async (manager) => {
      const [row]: SinkRow[] = await manager.query(`${SELECT} WHERE id = $1 FOR UPDATE`, [id]);
      if (row === undefined) return null;
      await startSink(manager, id, from, row.types ?? defaultTypes, row.owner_ids);
      const [started]: SinkRow[] = await manager.query(`${SELECT} WHERE id = $1`, [id]);
      return sinkOfRow(this.cipher, started);
    });
  }

  /** A new secret; the current one becomes the previous one until `previousExpiresAt`. */
  async rotateSecret(id: string, secret: string, previousExpiresAt: Date): Promise<Sink | null> {
    return this.dataSource.transaction(async (manager) => {
      const [row]: SinkRow[] = await manager.query(`${SELECT} WHERE id = $1 AND kind = 'http' FOR UPDATE`, [id]);
      if (row === undefined) return null;
      const current = this.cipher.open(row.secret!, aad(id, 'secret'));
      const [rows] = await manager.query(
        `UPDATE sinks SET secret = $2, previous_secret = $3, previous_secret_expires_at = $4, updated_at = now() WHERE id = $1 ${RETURNING}`,
        [
          id,
          this.cipher.seal(secret, aad(id, 'secret')),
          this.cipher.seal(current, aad(id, 'previous_secret')),
          previousExpiresAt,
        ],
      );
      return sinkOfRow(this.cipher, rows[0]);
    });
  }

  /**
   * Records the batches about to be sent, so a retry (even after a crash) sends the same ones: one
   * statement (and one commit) for every sink whose batch is recorded at that moment. Answers the
   * ids whose cursor was still where the batch starts.
   */
  async setInflights(batches: readonly CursorMove[]): Promise<Set<string>> {
    const rows: Array<{ id: string }> = await preparedQuery(
      this.dataSource,
      `UPDATE sinks s SET inflight_xid = m.tx, inflight_seq = m.ts
         FROM unnest($1::uuid[], $2::xid8[], $3::bigint[], $4::xid8[], $5::bigint[]) AS m(id, fx, fs, tx, ts)
        WHERE s.id = m.id AND s.cursor_xid = m.fx AND s.cursor_seq = m.fs RETURNING s.id::text AS id`,
      unnested(batches),
    );
    return new Set(rows.map((row) => row.id));
  }

  /**
   * The target acknowledged everything up to `to` (or nothing needed sending up to there).
   * Compare-and-set on the cursor: a sink replayed meanwhile keeps its new cursor, and two
   * dispatchers can never both move it. Answers the sink as it is now if the cursor moved (the
   * next round needs it: one statement less per batch), else null.
   */
  async recordSuccess(id: string, from: ChangePosition, to: ChangePosition, delivered: boolean): Promise<Sink | null> {
    const [rows] = await this.dataSource.query(
      `UPDATE sinks SET ${SUCCESS} WHERE id = $1 AND cursor_xid = $2 AND cursor_seq = $3 ${RETURNING}`,
      [id, ...pos(from), ...pos(to), delivered],
    );
    return rows[0] === undefined ? null : sinkOfRow(this.cipher, rows[0]);
  }

  /**
   * `recordSuccess` of delivered batches (catching up, or following the shared read) for every
   * sink whose move is asked at that moment, in one statement committed without waiting for the
   * disk (`cursorMoves`); answers the ids whose cursor moved (the callers know their sinks).
   */
  async moveCursors(moves: readonly CursorMove[]): Promise<Set<string>> {
    const rows: Array<{ id: string }> = await preparedQuery(
      this.dataSource,
      `UPDATE sinks s SET cursor_xid = m.tx, cursor_seq = m.ts, inflight_xid = NULL, inflight_seq = NULL, attempts = 0,
              next_attempt_at = NULL, failing_since = NULL, last_error = NULL, last_success_at = now(),
              state = CASE WHEN s.state = 'disabled' THEN s.state ELSE 'active' END
         FROM unnest($1::uuid[], $2::xid8[], $3::bigint[], $4::xid8[], $5::bigint[]) AS m(id, fx, fs, tx, ts)
        WHERE s.id = m.id AND s.cursor_xid = m.fx AND s.cursor_seq = m.fs RETURNING s.id::text AS id`,
      unnested(moves),
      this.cursorMoves.get(),
    );
    return new Set(rows.map((row) => row.id));
  }

  /** Moves the cursor back to `to` (a sink behind the compaction horizon), if it is still at `from`. */
  async restartFrom(id: string, from: ChangePosition, to: ChangePosition): Promise<void> {
    await this.dataSource.query(
      `UPDATE sinks SET cursor_xid = $4, cursor_seq = $5, inflight_xid = NULL, inflight_seq = NULL, epoch = epoch + 1
       WHERE id = $1 AND cursor_xid = $2 AND cursor_seq = $3`,
      [id, ...pos(from), ...pos(to)],
    );
  }

  /** How many sinks are `failing`, for the metric. */
  async countByKindAndState(): Promise<SinkCount[]> {
    return this.dataSource.query(`SELECT kind, state, count(*)::int AS n FROM sinks GROUP BY kind, state`);
  }

  async recordFailure(id: string, cursor: ChangePosition, failure: SinkFailure): Promise<void> {
    await this.dataSource.query(
      `UPDATE sinks SET attempts = attempts + 1, last_error = $4, next_attempt_at = $5,
         state = CASE WHEN state = 'disabled' THEN state ELSE $6 END, failing_since = COALESCE(failing_since, $7),
         inflight_xid = $8, inflight_seq = $9
       WHERE id = $1 AND cursor_xid = $2 AND cursor_seq = $3`,
      [
        id,
        ...pos(cursor),
        failure.error.slice(0, 2000),
        failure.nextAttemptAt,
        failure.state,
        failure.failingSince,
        failure.inflight?.transactionId ?? null,
        failure.inflight?.seq ?? null,
      ],
    );
  }

  /** Changes after the sink's cursor that it follows and its target has not acknowledged (counted up to `cap`). */
  async lag(
    sink: Pick<Sink, 'id' | 'cursor' | 'snapshotTo'>,
    types: readonly string[],
    ownerIds: readonly string[] | null,
    cap = 1_000_000,
  ): Promise<number> {
    // Walking a snapshot: what is left of it, then every change after its boundary.
    if (inSnapshot(sink)) {
      const [row]: Array<{ n: number }> = await this.dataSource.query(
        `SELECT count(*)::int AS n FROM sink_snapshot_entries WHERE sink_id = $1 AND (transaction_id, seq) > ($2::xid8, $3::bigint)`,
        [sink.id, ...pos(sink.cursor)],
      );
      return row.n + (await this.lag({ ...sink, cursor: sink.snapshotTo!, snapshotTo: null }, types, ownerIds, cap));
    }
    const [row]: Array<{ lag: number }> = await this.dataSource.query(
      `SELECT count(*)::int AS lag FROM (
         SELECT 1 FROM change_log c
          WHERE (c.transaction_id, c.seq) > ($1::xid8, $2::bigint) AND c.type = ANY($3::text[])
            AND ($4::text[] IS NULL OR c.owner_id = ANY($4::text[]))
          LIMIT $5) l`,
      [...pos(sink.cursor), [...types], ownerIds === null ? null : [...ownerIds], cap],
    );
    return row.lag;
  }
}

import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { SecretCipher } from '../common/secret-cipher.js';
import type { ChangePosition } from '../changes/change.js';
import { LazyPool, preparedQuery, SqlSession } from '../database/postgres-connection.js';
import type { SinkCount } from '../observability/sink-series.js';
import type { LagCount, Sink, SinkFailure, SinkKind, SinkState, TableLayout } from './sink.js';
import { inSnapshot, SinkFrom, startSink } from './sink-start.js';
import type { SinkPageKey, SinkPageQuery } from './sink-page.js';

interface SinkRow {
  id: string;
  kind: SinkKind;
  url: string | null;
  url_sealed: Buffer | null;
  schema: string | null;
  table_prefix: string | null;
  layout: TableLayout | null;
  stream: string | null;
  subject_prefix: string | null;
  types: string[] | null;
  owner_ids: string[] | null;
  batch_size: number;
  timeout_ms: number;
  cursor_xid: string;
  cursor_seq: string;
  state: SinkState;
  failing_since: Date | null;
  last_success_at: Date | null;
  last_error: string | null;
  next_attempt_at: Date | null;
  attempts: number;
  epoch: number;
  inflight_xid: string | null;
  inflight_seq: string | null;
  snapshot_xid: string | null;
  snapshot_seq: string | null;
  secret: Buffer | null;
  previous_secret: Buffer | null;
  previous_secret_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

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

const XIDS = `cursor_xid::text AS cursor_xid, inflight_xid::text AS inflight_xid, snapshot_xid::text AS snapshot_xid`;
const SELECT = `SELECT *, ${XIDS} FROM sinks`;
const RETURNING = `RETURNING *, ${XIDS}`;
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

/** `order=failing`'s first key (sink-page.ts STATE_RANK); the same expression as the index of migration 1765500000000. */
const RANK = `CASE state WHEN 'failing' THEN 0 WHEN 'retrying' THEN 1 WHEN 'disabled' THEN 2 ELSE 3 END`;
const FAILING_KEY = `coalesce(failing_since, 'infinity')`;
const instant = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
const KEY_COLUMNS = `${RANK} AS key_rank, CASE WHEN failing_since IS NULL THEN 'infinity' ELSE ${instant('failing_since')} END
  AS key_failing_since, ${instant('created_at')} AS key_created_at`;
const ORDER_BY = { created: 'created_at, id', failing: `${RANK}, ${FAILING_KEY}, created_at, id` } as const;

/** What a lag count of the lists reads at most per sink: its lag is then a lower bound. */
export const LIST_LAG_WINDOW = 10_000;

export interface SinkCounts {
  byState: Array<{ state: SinkState; n: number }>;
  byKind: Array<{ kind: SinkKind; n: number }>;
}

const escapeLike = (value: string) => value.replace(/[\\%_]/g, (c) => `\\${c}`);

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

const aad = (id: string, column: 'secret' | 'previous_secret' | 'url') => `sink:${id}:${column}`;

/** Sinks with their secrets sealed at rest: only this repository sees ciphertext. */
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
      return this.toSink(row);
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
    return row === undefined ? null : this.toSink(row);
  }

  /**
   * A page of sinks in `query.order`, after `query.after` (keyset: read from the indexes of
   * migration 1765500000000, never every sink). Answers `limit + 1` rows at most, so the caller
   * knows whether a next page exists, each with the key the next page starts after.
   */
  async page(query: SinkPageQuery): Promise<Array<{ sink: Sink; key: SinkPageKey }>> {
    const params: unknown[] = [];
    const param = (value: unknown) => `$${params.push(value)}`;
    const where: string[] = [];
    if (query.state !== undefined) where.push(`state = ${param(query.state)}`);
    if (query.kind !== undefined) where.push(`kind = ${param(query.kind)}`);
    if (query.ownerId !== undefined) where.push(`owner_ids @> ARRAY[${param(query.ownerId)}::text]`);
    if (query.q !== undefined) {
      where.push(
        `(id::text LIKE ${param(`${escapeLike(query.q.toLowerCase())}%`)} OR owner_ids @> ARRAY[${param(query.q)}::text])`,
      );
    }
    const after = query.after;
    if (after?.order === 'created')
      where.push(`(created_at, id) > (${param(after.createdAt)}::timestamptz, ${param(after.id)}::uuid)`);
    if (after?.order === 'failing') {
      where.push(
        `(${RANK}, ${FAILING_KEY}, created_at, id) > (${param(after.rank)}::int, ${param(after.failingSince)}::timestamptz,
          ${param(after.createdAt)}::timestamptz, ${param(after.id)}::uuid)`,
      );
    }
    const rows: Array<SinkRow & { key_rank: number; key_failing_since: string; key_created_at: string }> =
      await this.dataSource.query(
        `SELECT *, ${XIDS}, ${KEY_COLUMNS} FROM sinks
          ${where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`}
          ORDER BY ${ORDER_BY[query.order]} LIMIT ${param(query.limit + 1)}`,
        params,
      );
    return rows.map((row) => ({
      sink: this.toSink(row),
      key:
        query.order === 'created'
          ? { order: 'created', createdAt: row.key_created_at, id: row.id }
          : {
              order: 'failing',
              rank: row.key_rank,
              failingSince: row.key_failing_since,
              createdAt: row.key_created_at,
              id: row.id,
            },
    }));
  }

  /**
   * The lag of each of `ids` in one statement, as `lag` counts it, but counting at most `window`
   * entries of the snapshot and of the change log after the cursor per sink (a sink of a few owners
   * by the owner index: a sink at the head writes its cursor forward only now and then, so the
   * changes of the others after it are many).
   */
  async lags(
    ids: readonly string[],
    defaultTypes: readonly string[],
    window = LIST_LAG_WINDOW,
  ): Promise<Map<string, LagCount>> {
    if (ids.length === 0) return new Map();
    const rows: Array<{ id: string; snapshot: number; tail: number; scanned: number }> = await this.dataSource.query(
      `SELECT s.id, snap.n AS snapshot, tail.n AS tail, tail.scanned
         FROM sinks s
        CROSS JOIN LATERAL (SELECT s.snapshot_xid IS NOT NULL
                                   AND (s.cursor_xid, s.cursor_seq) < (s.snapshot_xid, s.snapshot_seq) AS walking) w
        CROSS JOIN LATERAL (
          SELECT count(*)::int AS n FROM (
            SELECT 1 FROM sink_snapshot_entries e
             WHERE w.walking AND e.sink_id = s.id AND (e.transaction_id, e.seq) > (s.cursor_xid, s.cursor_seq)
             LIMIT $3) e) snap
        CROSS JOIN LATERAL (
          SELECT count(*)::int AS n, count(*)::int AS scanned
            FROM (SELECT 1 FROM change_log c
                   WHERE (c.transaction_id, c.seq) > (CASE WHEN w.walking THEN s.snapshot_xid ELSE s.cursor_xid END,
                                                      CASE WHEN w.walking THEN s.snapshot_seq ELSE s.cursor_seq END)
                     AND c.type = ANY(coalesce(s.types, $2::text[]))
                     AND (s.owner_ids IS NULL OR c.owner_id = ANY(s.owner_ids))
                   LIMIT $3) c) tail
        WHERE s.id = ANY($1::uuid[])`,
      [[...ids], [...defaultTypes], window],
    );
    return new Map(
      rows.map((row) => [
        row.id,
        { lag: row.snapshot + row.tail, capped: row.snapshot >= window || row.scanned >= window },
      ]),
    );
  }

  /** How many sinks there are in each state and of each kind (only those with at least one). */
  async counts(): Promise<SinkCounts> {
    const rows: Array<{ state: SinkState | null; kind: SinkKind | null; n: number }> = await this.dataSource.query(
      `SELECT state, kind, count(*)::int AS n FROM sinks GROUP BY GROUPING SETS ((state), (kind))`,
    );
    return {
      byState: rows.flatMap((row) => (row.state === null ? [] : [{ state: row.state, n: row.n }])),
      byKind: rows.flatMap((row) => (row.kind === null ? [] : [{ kind: row.kind, n: row.n }])),
    };
  }

  /**
   * The ids of `limit` sinks that deliver (not disabled) likely the furthest behind: those failing
   * or retrying first, then by cursor (a sink at the head writes its cursor forward only now and
   * then, so an old cursor alone does not make a lagging sink).
   */
  async furthestBehind(limit: number): Promise<string[]> {
    const rows: Array<{ id: string }> = await this.dataSource.query(
      `SELECT id FROM sinks WHERE state <> 'disabled' ORDER BY state = 'active', cursor_xid, cursor_seq, id LIMIT $1`,
      [limit],
    );
    return rows.map((row) => row.id);
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
    return rows[0] === undefined ? null : this.toSink(rows[0]);
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
      return this.toSink(started);
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
      return this.toSink(rows[0]);
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
    return rows[0] === undefined ? null : this.toSink(rows[0]);
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

  /** A sink whose secrets do not open (TOKEN_ENCRYPTION_KEY changed) has none: it cannot sign, and says so. */
  private toSink(row: SinkRow): Sink {
    const open = (value: Buffer | null, column: 'secret' | 'previous_secret' | 'url') => {
      if (value === null) return null;
      try {
        return this.cipher.open(value, aad(row.id, column));
      } catch {
        return null;
      }
    };
    return {
      id: row.id,
      kind: row.kind,
      url: row.url,
      targetUrl: open(row.url_sealed, 'url'),
      schema: row.schema,
      tablePrefix: row.table_prefix,
      layout: row.layout,
      stream: row.stream,
      subjectPrefix: row.subject_prefix,
      types: row.types,
      ownerIds: row.owner_ids,
      batchSize: row.batch_size,
      timeoutMs: row.timeout_ms,
      cursor: { transactionId: row.cursor_xid, seq: row.cursor_seq },
      state: row.state,
      failingSince: row.failing_since,
      lastSuccessAt: row.last_success_at,
      lastError: row.last_error,
      nextAttemptAt: row.next_attempt_at,
      attempts: row.attempts,
      epoch: row.epoch,
      inflight:
        row.inflight_xid === null || row.inflight_seq === null
          ? null
          : { transactionId: row.inflight_xid, seq: row.inflight_seq },
      snapshotTo:
        row.snapshot_xid === null || row.snapshot_seq === null
          ? null
          : { transactionId: row.snapshot_xid, seq: row.snapshot_seq },
      secret: open(row.secret, 'secret'),
      previousSecret:
        row.previous_secret_expires_at !== null && row.previous_secret_expires_at > new Date()
          ? open(row.previous_secret, 'previous_secret')
          : null,
      previousSecretExpiresAt: row.previous_secret_expires_at,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    };
  }
}

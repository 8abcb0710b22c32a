import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { advisoryLocks, lockQuery } from '../database/advisory-locks.js';
import { LazyPool, preparedQuery, SqlSession } from '../database/postgres-connection.js';
import type { ApiResource } from '../projection/api-resource.js';
import { Change, ChangeEntry, ChangeFilter, ChangePage, ChangePosition, ChangeText, START } from './change.js';

/** A change_log row as read with the columns of `changeColumns`. */
export interface RawChange {
  seq: string;
  transaction_id: string;
  change_id: string;
  type: string;
  id: string;
  owner_id: string | null;
  op: Change['op'];
  resource: ApiResource;
  at: Date;
}

/** The columns a reader selects from change_log under `alias`, for `toEntry`. */
export const changeColumns = (alias: string) =>
  `${alias}.seq::text AS seq, ${alias}.transaction_id::text AS transaction_id, ${alias}.change_id, ${alias}.type, ${alias}.id, ${alias}.owner_id, ${alias}.op, ${alias}.resource, ${alias}.at`;

/** A change_log row as read with the columns of `changeTextColumns`. */
export interface RawChangeText extends Omit<RawChange, 'resource' | 'at'> {
  /** The resource's JSON in the API's key order. */
  resource: string;
  /** ISO 8601 in UTC, milliseconds, as `toEntry` writes it. */
  at: string;
}

/** The columns a reader selects from change_log under `alias`, for `toText`. */
export const changeTextColumns = (alias: string) =>
  `${alias}.seq::text AS seq, ${alias}.transaction_id::text AS transaction_id, ${alias}.change_id, ${alias}.type, ${alias}.id, ${alias}.owner_id, ${alias}.op, menu_sync_resource_json(${alias}.resource) AS resource, to_char(${alias}.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at`;

/** How a reader reads a change: the columns it selects under alias `c`, and what it makes of such a row. */
export interface ChangeShape<R, T> {
  columns: string;
  make(row: R): T;
}
export const AS_ENTRY: ChangeShape<RawChange, ChangeEntry> = { columns: changeColumns('c'), make: toEntry };
export const AS_TEXT: ChangeShape<RawChangeText, ChangeText> = { columns: changeTextColumns('c'), make: toText };

/**
 * The newest change a snapshot sees (no row: the log is empty), as text columns `transaction_id`
 * and `seq`. A statement may join it to its own reads to have both in one snapshot.
 */
export const NEWEST_CHANGE_POSITION = `SELECT c.transaction_id::text AS transaction_id, c.seq::text AS seq FROM change_log c ORDER BY c.transaction_id DESC, c.seq DESC LIMIT 1`;

/** A row of NEWEST_CHANGE_POSITION (null columns or no row: START). */
export function changePosition(row: { transaction_id: string | null; seq: string | null } | undefined): ChangePosition {
  return row?.transaction_id != null && row.seq != null ? { transactionId: row.transaction_id, seq: row.seq } : START;
}

/**
 * The sinks' reads share this many connections, however many sinks read on their own at once (a
 * dispatcher starting with thousands of them): each read is short, and a queue costs less than the
 * connections PostgreSQL has for the whole cluster.
 */
const SINK_READ_CONNECTIONS = 8;

/** Runs a statement on what a read was given: a session, or the sinks' pool. */
type Run = <Row>(sql: string, params: unknown[]) => Promise<Row[]>;

/** The last change after `after` below `horizon`, or `after` when there is none. */
async function readableEnd(run: Run, after: ChangePosition, horizon: string): Promise<ChangePosition> {
  const [end] = await run<{ transaction_id: string; seq: string }>(
    `SELECT c.transaction_id::text AS transaction_id, c.seq::text AS seq FROM change_log c
      WHERE (c.transaction_id, c.seq) > ($1::xid8, $2::bigint) AND c.transaction_id < $3::xid8
      ORDER BY c.transaction_id DESC, c.seq DESC LIMIT 1`,
    [after.transactionId, after.seq, horizon],
  );
  return end ? { transactionId: end.transaction_id, seq: end.seq } : after;
}

/** The change log's reads and its compaction. Writes happen inside the read-model statements (ProjectionRepository, rebuild swap). */
@Injectable()
export class ChangeLogRepository implements OnApplicationShutdown {
  /**
   * The sinks' reads, prepared, on sessions that plan them generically: PostgreSQL's own choice
   * was a custom plan at every run (the generic estimate cannot see how selective the type filter
   * is), for the same plan. JIT is off there: a generic plan's row estimates are high enough to
   * compile every execution (tens of ms each), which made a 1M-change catch-up about 5× slower. A pool of
   * its own, so other statements keep PostgreSQL's choice.
   */
  private readonly sinkReads: LazyPool;

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    this.sinkReads = new LazyPool(
      dataSource,
      { application_name: 'menu-sync sinks', max: SINK_READ_CONNECTIONS },
      { plan_cache_mode: 'force_generic_plan', jit: 'off' },
    );
  }

  /** Ends the sinks' pool (Nest calls this hook last, after the sink workers stopped). */
  async onApplicationShutdown(): Promise<void> {
    await this.sinkReads.end();
  }

  /**
   * Changes after `after` in (transaction id, seq) order, only those written by transactions older
   * than every transaction of this database still open (event_log_horizon(), as the event log's
   * readers): a change committed late appears after the cursor of any reader not yet past it, so
   * nothing is skipped. The horizon is read once and used for both statements, so a page that the
   * filters leave short can move the cursor to the end of what was readable without skipping.
   * The page carries the compaction horizon of the same snapshot: a reader whose cursor is below
   * it has lost changes (docs/reference.md §11).
   */
  readAfter(after: ChangePosition, filter: ChangeFilter, db: SqlSession = this.dataSource): Promise<ChangePage> {
    return this.readPage(after, filter, AS_ENTRY, (sql, params) => db.query(sql, params));
  }

  /** `readAfter`, each change as the JSON text a push sink sends. */
  readTextsAfter(after: ChangePosition, filter: ChangeFilter): Promise<ChangePage<ChangeText>> {
    return this.readPage(after, filter, AS_TEXT, (sql, params) =>
      preparedQuery(this.dataSource, sql, params, this.sinkReads.get()),
    );
  }

  private async readPage<R, T extends { position: ChangePosition }>(
    after: ChangePosition,
    filter: ChangeFilter,
    shape: ChangeShape<R, T>,
    run: Run,
  ): Promise<ChangePage<T>> {
    const params: unknown[] = [after.transactionId, after.seq, filter.limit, filter.horizon ?? null];
    const where = [`(c.transaction_id, c.seq) > ($1::xid8, $2::bigint)`, `c.transaction_id < h.horizon`];
    if (filter.types !== undefined) where.push(`c.type = ANY($${params.push([...filter.types])}::text[])`);
    // One owner (a sink or stream per store) is an equality, so the owner index is scanned in
    // reader order and the LIMIT stops it; `= ANY` of several is a bitmap of all their changes after the cursor.
    if (filter.ownerIds?.length === 1) where.push(`c.owner_id = $${params.push(filter.ownerIds[0])}::text`);
    else if (filter.ownerIds !== undefined)
      where.push(`c.owner_id = ANY($${params.push([...filter.ownerIds])}::text[])`);
    // One statement, so one snapshot: the compaction horizon read with the rows is the one they
    // obey (a compaction committed between two statements could delete changes after the cursor
    // unseen). A page with no rows still answers one row, of the horizons alone. MATERIALIZED: the
    // horizon function scans pg_stat_activity, so inlined per row it would cost more than the read.
    // An earlier page's horizon spares the horizon function (see ChangeFilter.horizon).
    const sql = `WITH h AS MATERIALIZED (SELECT coalesce($4::xid8, event_log_horizon()) AS horizon)
       SELECT h.horizon::text AS horizon, k.transaction_id::text AS compacted_xid, k.seq::text AS compacted_seq, c.*
         FROM h
        CROSS JOIN change_log_horizon k
         LEFT JOIN LATERAL (SELECT ${shape.columns} FROM change_log c WHERE ${where.join(' AND ')}
                             ORDER BY c.transaction_id, c.seq LIMIT $3) c ON true`;
    const rows = await run<R & { horizon: string; compacted_xid: string; compacted_seq: string; seq: string | null }>(
      sql,
      params,
    );
    const [{ horizon, compacted_xid, compacted_seq }] = rows;
    const changes = rows[0].seq === null ? [] : rows.map((row) => shape.make(row));
    if (filter.horizon !== undefined && changes.length < filter.limit)
      return this.readPage(after, { ...filter, horizon: undefined }, shape, run);
    const compactedTo = { transactionId: compacted_xid, seq: compacted_seq };
    if (changes.length === filter.limit)
      return { changes, next: changes[changes.length - 1].position, compactedTo, horizon };
    if (filter.types === undefined && filter.ownerIds === undefined)
      return { changes, next: changes.at(-1)?.position ?? after, compactedTo, horizon };
    return { changes, next: await readableEnd(run, after, horizon), compactedTo, horizon };
  }

  /** The newest seq written (0 when none), for the head metric. */
  async head(): Promise<number> {
    const [row]: Array<{ head: string | null }> = await this.dataSource.query(
      `SELECT max(seq)::text AS head FROM change_log`,
    );
    return Number(row.head ?? 0);
  }

  /** The newest change a gap-safe reader may read now, as text (`transaction id.seq`), '' when none. */
  async readableHead(): Promise<string> {
    const [row]: Array<{ head: string }> = await this.dataSource.query(
      `SELECT transaction_id::text || '.' || seq::text AS head FROM change_log
        WHERE transaction_id < event_log_horizon() ORDER BY transaction_id DESC, seq DESC LIMIT 1`,
    );
    return row?.head ?? '';
  }

  /**
   * The newest change a gap-safe reader may read now (START when none): every change at or before
   * it is committed, and every change committed later comes after it.
   */
  async readablePosition(): Promise<ChangePosition> {
    const [row]: Array<{ transaction_id: string; seq: string }> = await this.dataSource.query(
      `SELECT transaction_id::text AS transaction_id, seq::text AS seq FROM change_log
        WHERE transaction_id < event_log_horizon() ORDER BY transaction_id DESC, seq DESC LIMIT 1`,
    );
    return changePosition(row);
  }

  /**
   * The position of the newest change visible to the caller's transaction: read in the snapshot of
   * a read-model query (REPEATABLE READ), it is the cursor consistent with what that query saw.
   * Exact because every transaction writing changes holds the change-log writer lock from before
   * it has a transaction id until it commits (see ChangeLogWriterLock): the writers' transaction ids are in commit order.
   */
  async positionInSnapshot(db: SqlSession): Promise<ChangePosition> {
    const [row]: Array<{ transaction_id: string; seq: string }> = await db.query(NEWEST_CHANGE_POSITION);
    return changePosition(row);
  }

  /** The highest position compaction deleted: cursors below it are expired. */
  async compactionHorizon(db: SqlSession = this.dataSource): Promise<ChangePosition> {
    const [row]: Array<{ transaction_id: string; seq: string }> = await db.query(
      `SELECT transaction_id::text AS transaction_id, seq::text AS seq FROM change_log_horizon`,
    );
    return { transactionId: row.transaction_id, seq: row.seq };
  }

  /**
   * Deletes changes written before `before` except the newest of each resource, and only those of
   * finished transactions, then raises the horizon to the highest position deleted. One transaction;
   * while another daemon compacts, nothing. A log with no change before `before` is left alone
   * without ranking it (a sort of the whole log, at every start of a daemon).
   */
  async compact(before: Date): Promise<number> {
    return this.dataSource.transaction(async (manager) => {
      const [{ result: locked }] = await manager.query(
        ...lockQuery('pg_try_advisory_xact_lock', advisoryLocks.single('changeLogCompaction')),
      );
      if (!locked) return 0;
      const [{ due }]: Array<{ due: boolean }> = await manager.query(
        `SELECT EXISTS (SELECT 1 FROM change_log WHERE at < $1) AS due`,
        [before],
      );
      if (!due) return 0;
      const [row]: Array<{ deleted: number; transaction_id: string | null; seq: string | null }> = await manager.query(
        `WITH ranked AS (
           SELECT seq, at, row_number() OVER (PARTITION BY type, id ORDER BY transaction_id DESC, seq DESC) AS newest_first
             FROM change_log WHERE transaction_id < event_log_horizon()),
         doomed AS (SELECT seq FROM ranked WHERE newest_first > 1 AND at < $1),
         deleted AS (DELETE FROM change_log c USING doomed WHERE c.seq = doomed.seq RETURNING c.transaction_id, c.seq),
         highest AS (SELECT transaction_id, seq FROM deleted ORDER BY transaction_id DESC, seq DESC LIMIT 1),
         moved AS (UPDATE change_log_horizon h SET transaction_id = highest.transaction_id, seq = highest.seq, compacted_at = now()
                     FROM highest WHERE (highest.transaction_id, highest.seq) > (h.transaction_id, h.seq) RETURNING 1)
         SELECT (SELECT count(*) FROM deleted)::int AS deleted, (SELECT count(*) FROM moved)::int AS moved`,
        [before],
      );
      return row.deleted;
    });
  }
}

export function toEntry(row: RawChange): ChangeEntry {
  const r = row.resource;
  // jsonb sorts keys; the API's order is restored here.
  const resource: ApiResource = {
    type: r.type,
    id: r.id,
    owner_id: r.owner_id,
    attributes: r.attributes,
    relationships: r.relationships,
    version: { event_id: r.version.event_id, occurred_at: r.version.occurred_at, position: r.version.position },
    deleted: r.deleted,
  };
  return {
    change: {
      seq: Number(row.seq),
      change_id: row.change_id,
      type: row.type,
      id: row.id,
      owner_id: row.owner_id,
      op: row.op,
      resource,
      at: new Date(row.at).toISOString(),
    },
    position: { transactionId: row.transaction_id, seq: row.seq },
  };
}

/** The change as the JSON text `JSON.stringify(toEntry(row).change)` means: the same keys in the same order. */
export function toText(row: RawChangeText): ChangeText {
  const json =
    `{"seq":${row.seq},"change_id":${JSON.stringify(row.change_id)},"type":${JSON.stringify(row.type)},` +
    `"id":${JSON.stringify(row.id)},"owner_id":${JSON.stringify(row.owner_id)},"op":${JSON.stringify(row.op)},` +
    `"resource":${row.resource},"at":"${row.at}"}`;
  return {
    position: { transactionId: row.transaction_id, seq: row.seq },
    seq: Number(row.seq),
    changeId: row.change_id,
    type: row.type,
    id: row.id,
    ownerId: row.owner_id,
    json,
  };
}

import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { statementFor } from '../database/database-sessions.js';
import { LazyPool } from '../database/postgres-connection.js';
import {
  AppendResult,
  LogCheckpoint,
  LogEntry,
  LogEntrySummary,
  LogFilter,
  LogPage,
  NewLogEntry,
} from './log-entry.js';
import {
  APPEND,
  isOtherLayout,
  LAYOUT_SQL,
  LogLayout,
  POSITIONS,
  UNPARTITIONED_APPEND,
  UNPARTITIONED_POSITIONS,
} from './append-statements.js';

const SUMMARY = `position, event_id, event_type, subject_type, subject_id, owner_id, occurred_at, received_at, source, handled`;
/** Text casts below keep their column names: ORDER BY must name the table's columns (`e.`), or it sorts the text. */
const FULL = `${SUMMARY}, event_seq, key_id, content_type, payload::text AS payload, raw_body, raw_sealed, raw_key, raw_key_at, sha256, transaction_id::text AS transaction_id`;

const OPEN = Buffer.from('[');
const COMMA = Buffer.from(',');
const CLOSE = Buffer.from(']');

/**
 * The payloads as one JSON array, in bytes: node-pg sends a Buffer as it is, in the binary format,
 * which for `json` is the text itself. Payloads whose UTF-8 the parser kept (the bytes received)
 * are copied, not decoded and encoded again.
 */
function jsonArray(entries: NewLogEntry[]): Buffer {
  const parts: Buffer[] = [OPEN];
  for (const entry of entries) {
    if (parts.length > 1) parts.push(COMMA);
    parts.push(entry.payloadUtf8 ?? Buffer.from(entry.payload, 'utf8'));
  }
  parts.push(CLOSE);
  return Buffer.concat(parts);
}

/**
 * Connections of the append path's own pool: one per commit the AppendBatcher runs at once. Its
 * own, so that a delivery's commit never queues behind the API's reads (or a burst of them, which a
 * slow database makes longer) for a connection of the shared pool.
 */
export const APPEND_CONNECTIONS = 2;

@Injectable()
export class EventLogRepository {
  private readonly appendPool: LazyPool;
  /** The log's layout, once looked up (see append-statements.ts). */
  private layout: Promise<LogLayout> | undefined;

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    this.appendPool = new LazyPool(dataSource, { max: APPEND_CONNECTIONS });
  }

  /**
   * Appends a batch in one statement (one commit). Results come back in input order; an event id
   * already in the log, or repeated within the batch, is not inserted and reports the original's position.
   */
  async append(entries: NewLogEntry[]): Promise<AppendResult[]> {
    const unique = new Map<string, NewLogEntry>();
    for (const entry of entries) if (!unique.has(entry.eventId)) unique.set(entry.eventId, entry);
    const rows = [...unique.values()];
    const column = <T>(pick: (entry: NewLogEntry) => T) => rows.map(pick);
    const values = [
      column((e) => e.eventId),
      column((e) => e.eventType),
      column((e) => e.subjectType),
      column((e) => e.subjectId),
      column((e) => e.ownerId),
      column((e) => e.occurredAt),
      column((e) => e.eventSeq),
      column((e) => e.source),
      column((e) => e.handled),
      column((e) => e.receivedAt),
      column((e) => e.keyId),
      column((e) => e.contentType),
      jsonArray(rows),
      column((e) => e.rawBody),
      column((e) => e.rawSealed),
      column((e) => e.rawKey),
      column((e) => (e.rawKeyAt === null ? null : `{${e.rawKeyAt.join(',')}}`)),
      column((e) => e.sha256),
    ];
    const inserted = await this.insert(values);
    const byId = new Map(inserted.rows.map((row) => [row.event_id, { position: row.position, inserted: true }]));
    // Already in the log, or committed by a concurrent append while this one waited on the conflict.
    const missing = rows.filter((entry) => !byId.has(entry.eventId)).map((entry) => entry.eventId);
    if (missing.length > 0) {
      const positions = (await this.logLayout()) === 'partitioned' ? POSITIONS : UNPARTITIONED_POSITIONS;
      const found = await this.pool.query<{ event_id: string; position: string }>({
        ...statementFor(this.dataSource, positions),
        values: [missing],
      });
      for (const row of found.rows) byId.set(row.event_id, { position: row.position, inserted: false });
    }
    const reported = new Set<string>();
    return entries.map((entry) => {
      const row = byId.get(entry.eventId);
      if (!row) throw new Error(`append did not confirm event ${entry.eventId}`);
      const first = row.inserted && !reported.has(entry.eventId);
      reported.add(entry.eventId);
      return { eventId: entry.eventId, position: Number(row.position), inserted: first };
    });
  }

  /**
   * The append's statement for the log's layout: looked up once, and again when the statement is
   * refused for the other one (migration 1766800000000 ran meanwhile). On the partitioned log, a
   * position past the last partition makes the partitions it needs, then tries once more.
   */
  private async insert(values: unknown[]): Promise<pg.QueryResult<{ event_id: string; position: string }>> {
    try {
      return await this.insertAs(await this.logLayout(), values);
    } catch (error) {
      if (!isOtherLayout(error)) throw error;
      this.layout = undefined;
      return this.insertAs(await this.logLayout(), values);
    }
  }

  private async insertAs(
    layout: LogLayout,
    values: unknown[],
  ): Promise<pg.QueryResult<{ event_id: string; position: string }>> {
    if (layout === 'unpartitioned')
      return this.pool.query({ ...statementFor(this.dataSource, UNPARTITIONED_APPEND), values });
    try {
      return await this.pool.query({ ...statementFor(this.dataSource, APPEND), values });
    } catch (error) {
      if (!isPastLastPartition(error)) throw error;
      await this.extend(0);
      return this.pool.query({ ...statementFor(this.dataSource, APPEND), values });
    }
  }

  private logLayout(): Promise<LogLayout> {
    this.layout ??= this.dataSource.query(LAYOUT_SQL).then(
      ([row]: Array<{ partitioned: boolean }>) => (row.partitioned ? 'partitioned' : 'unpartitioned'),
      (error: unknown) => {
        this.layout = undefined;
        throw error;
      },
    );
    return this.layout;
  }

  /**
   * Makes partitions (of `size` positions, by default the last one's size) until the last bound is
   * more than `ahead` positions past the head; answers the last bound.
   */
  async extend(ahead: number, size?: number): Promise<number> {
    const [{ bound }]: Array<{ bound: string }> = await this.dataSource.query(
      `SELECT event_log_extend($1, $2) AS bound`,
      [ahead, size ?? null],
    );
    return Number(bound);
  }

  /** The log's partitions, in position order (the first one's lower bound is null: no bound). */
  async partitions(): Promise<Array<{ name: string; lower: number | null; upper: number }>> {
    const rows: Array<{ name: string; lower: string | null; upper: string }> = await this.dataSource.query(
      `SELECT partition::text AS name, lower, upper FROM event_log_partitions()`,
    );
    return rows.map((row) => ({
      name: row.name,
      lower: row.lower === null ? null : Number(row.lower),
      upper: Number(row.upper),
    }));
  }

  /**
   * Folds the owners' rows (one per owner per append) into one per owner. Only rows this
   * statement deleted are folded: a row a concurrent append adds, or another fold took, is not.
   */
  async compactOwners(): Promise<void> {
    await this.dataSource.query(
      `WITH folded AS (
         DELETE FROM event_log_owners WHERE owner_id IN (
           SELECT owner_id FROM event_log_owners GROUP BY owner_id HAVING count(*) > 1)
         RETURNING owner_id, events, first_at, last_at)
       INSERT INTO event_log_owners (owner_id, events, first_at, last_at)
       SELECT owner_id, sum(events), min(first_at), max(last_at) FROM folded GROUP BY owner_id`,
    );
  }

  /**
   * The append path's pool (created on first use, poolOfItsOwn): the append skips TypeORM's query
   * runner. A database that was restarted or made read-only and back gets fresh sessions.
   */
  private get pool(): pg.Pool {
    return this.appendPool.get();
  }

  /** Closes the append path's pool (after the last append settled). */
  async close(): Promise<void> {
    await this.appendPool.end();
  }

  /**
   * Reads entries after `checkpoint` in (transaction id, position) order, and only those written by
   * transactions older than every transaction of this database still open (event_log_horizon, in
   * the event-log migration). An append that commits late therefore
   * appears after the checkpoint of any reader that has not yet passed it: nothing is skipped,
   * nothing is read twice, and no time-based guess is involved.
   */
  async readAfter(checkpoint: LogCheckpoint, limit: number): Promise<LogPage> {
    const rows: RawEntry[] = await this.dataSource.query(
      `SELECT ${FULL} FROM event_log e
        WHERE (e.transaction_id, e.position) > ($1::xid8, $2::bigint)
          AND e.transaction_id < (SELECT event_log_horizon())
        ORDER BY e.transaction_id, e.position
        LIMIT $3`,
      [checkpoint.transactionId, checkpoint.position, limit],
    );
    const entries = rows.map(toEntry);
    const last = rows.at(-1);
    return {
      entries,
      checkpoint: last ? { transactionId: last.transaction_id, position: String(last.position) } : checkpoint,
    };
  }

  async list(filter: LogFilter): Promise<LogEntrySummary[]> {
    const params: unknown[] = [filter.after, filter.limit];
    const where = ['position > $1'];
    if (filter.before !== undefined) {
      params.push(filter.before);
      where.push(`position < $${params.length}`);
    }
    for (const [column, value] of [
      ['event_type', filter.eventType],
      ['subject_type', filter.subjectType],
      ['subject_id', filter.subjectId],
    ] as const) {
      if (value === undefined) continue;
      params.push(value);
      where.push(`${column} = $${params.length}`);
    }
    if (filter.ownerIds !== undefined) {
      params.push(filter.ownerIds);
      where.push(`owner_id = ANY($${params.length}::text[])`);
    }
    const rows: RawEntry[] = await this.dataSource.query(
      `SELECT ${SUMMARY} FROM event_log e WHERE ${where.join(' AND ')}
        ORDER BY e.position ${filter.before === undefined ? '' : 'DESC'} LIMIT $2`,
      params,
    );
    return rows.map(toSummary);
  }

  async findByPosition(position: number): Promise<LogEntry | null> {
    const rows: RawEntry[] = await this.dataSource.query(`SELECT ${FULL} FROM event_log WHERE position = $1`, [
      position,
    ]);
    return rows.length === 0 ? null : toEntry(rows[0]);
  }

  /**
   * Each owner in the log with its span of occurred_at (the console's owner picker and time
   * slider), from the counts the append keeps, not from the log.
   */
  async owners(
    ownerIds?: readonly string[],
  ): Promise<Array<{ ownerId: string; events: number; first: Date; last: Date }>> {
    const rows: Array<{ owner_id: string; events: string; first: Date; last: Date }> = await this.dataSource.query(
      `SELECT owner_id, sum(events)::bigint AS events, min(first_at) AS first, max(last_at) AS last
         FROM event_log_owners ${ownerIds === undefined ? '' : 'WHERE owner_id = ANY($1::text[])'}
        GROUP BY owner_id ORDER BY sum(events) DESC, owner_id`,
      ownerIds === undefined ? [] : [ownerIds],
    );
    return rows.map((row) => ({ ownerId: row.owner_id, events: Number(row.events), first: row.first, last: row.last }));
  }

  async headPosition(): Promise<number> {
    const rows: Array<{ head: string | null }> = await this.dataSource.query(
      `SELECT max(position) AS head FROM event_log`,
    );
    return Number(rows[0].head ?? 0);
  }
}

/** PostgreSQL's answer to a row whose partition key no partition takes. */
function isPastLastPartition(error: unknown): boolean {
  const { code, message } = error as { code?: string; message?: string };
  return code === '23514' && message?.startsWith('no partition of relation') === true;
}

interface RawEntry {
  position: string;
  event_id: string;
  event_type: string;
  subject_type: string;
  subject_id: string;
  owner_id: string | null;
  occurred_at: Date;
  received_at: Date;
  source: LogEntry['source'];
  handled: boolean;
  event_seq: string | null;
  key_id: string | null;
  content_type: string | null;
  payload: string;
  raw_body: Buffer | null;
  raw_sealed: boolean;
  raw_key: Buffer | null;
  raw_key_at: number[] | null;
  sha256: Buffer;
  transaction_id: string;
}

function toSummary(row: RawEntry): LogEntrySummary {
  return {
    position: Number(row.position),
    eventId: row.event_id,
    eventType: row.event_type,
    subjectType: row.subject_type,
    subjectId: row.subject_id,
    ownerId: row.owner_id,
    occurredAt: row.occurred_at,
    receivedAt: row.received_at,
    source: row.source,
    handled: row.handled,
  };
}

function toEntry(row: RawEntry): LogEntry {
  return {
    ...toSummary(row),
    eventSeq: row.event_seq,
    keyId: row.key_id,
    contentType: row.content_type,
    payload: row.payload,
    sha256: row.sha256,
    raw: row.raw_body ?? Buffer.from(row.payload, 'utf8'),
    rawSealed: row.raw_sealed,
    rawKey: row.raw_key,
    rawKeyAt: row.raw_key_at,
    transactionId: row.transaction_id,
  };
}

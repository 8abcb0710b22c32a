import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { SecretCipher } from '../common/secret-cipher.js';
import type { LagCount, Sink, SinkKind, SinkState } from './sink.js';
import type { SinkPageKey, SinkPageQuery } from './sink-page.js';
import { sinkOfRow, SinkRow, XIDS } from './sink-rows.js';

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

/**
 * What the management API and the CLI list of sinks: a page in an order, their lags, counts by
 * state and kind, and those likely furthest behind. Reads only; SinkRepository writes.
 */
@Injectable()
export class SinkListing {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly cipher: SecretCipher,
  ) {}

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
      sink: sinkOfRow(this.cipher, row),
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
}

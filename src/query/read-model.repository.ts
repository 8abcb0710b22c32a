import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import type { ChangePosition } from '../changes/change.js';
import { changePosition, NEWEST_CHANGE_POSITION } from '../changes/change-log.repository.js';
import { LazyPool, preparedQuery, sharedPool } from '../database/postgres-connection.js';
import {
  archiveBaseOf,
  CHANGE_COLUMNS,
  NEWEST_FIRST,
  ORDERS_PROJECTION,
  subjectOf,
} from '../projection/projection-definitions.js';
import { ResourceTable } from '../projection/resource-tables.js';
import { linkedIds, resourceJson } from './resource-sql.js';

export interface ResourceRow {
  id: string;
  sort_key: string;
  owner_id: string | null;
  attributes: Record<string, unknown>;
  relationships: Record<string, unknown>;
  deleted: boolean;
  occurred_at: Date;
  event_id: string;
  position: string;
}

/** A resource as JSON text (with what the reader needs beside it: its sort key, whether deleted, the ids it links to). */
export interface ResourceDoc {
  id: string;
  sort_key: string;
  deleted: boolean;
  doc: string;
  /** The ids of the to-many relationship findDocsAsOf was asked for (else empty). */
  links: string[];
}

/** The columns of a ResourceDoc read from the live tables (alias `r`). */
const docColumns = (table: ResourceTable) => `id, sort_key, deleted, ${resourceJson('r', table.type)}::text AS doc`;

export interface RowFilter {
  ownerId?: string;
  /** A token's owner scope (docs/reference.md §12): only these owners' resources, whatever else is asked. */
  ownerIds?: readonly string[];
  ids?: string[];
  updatedSince?: Date;
  includeDeleted?: boolean;
  afterSortKey?: string;
  limit?: number;
  /** Fold the log up to this instant instead of reading the live tables. */
  asOf?: Date;
  /**
   * With `asOf`: fold the archive base too (docs/reference.md §8, The archive base). Set once
   * `event_log_archives` has a row (ArchiveHorizonService.archived); without, the statements stay
   * those of a whole log.
   */
  archiveBase?: boolean;
}

const ROW_COLUMNS =
  'id, sort_key, owner_id, attributes, relationships, deleted, occurred_at, event_id, position::text AS position';

/** As the live read model, `as_of` leaves out events the projector parked (docs/reference.md §4). */
const notParked = (table: ResourceTable) =>
  `NOT EXISTS (SELECT 1 FROM ${table.schema}.parked_events parked WHERE parked.position = e.position)`;

/** The same order as `event_log_subject_version_idx` walked backwards (NULL event_seq lowest). */
const NEWEST_INDEXED = `e.occurred_at DESC, e.event_seq DESC NULLS LAST, e.event_id COLLATE "C" DESC`;

/** Ids in the log's subject_id and in the tables are canonical already (src/domain/canonical-id.ts): plain equality. */
const sameSubject = (subjectId: string, id: string) => `${subjectId} = ${id}`;
const menuSortKey = (id: string) => `menu_sync_sort_key(${id})`;

/**
 * The rest of an `as_of` statement after its `page` CTE (id, sort_key, version, deleted,
 * data_position): each row's attributes and relationships from the live row when it holds the
 * data event, else from that event's payload; the entries to parse read together, prefetched.
 */
const pageResources = (live: string, base?: { table: string; at: string }) => `held AS MATERIALIZED (
         ${base === undefined ? heldLive(live) : heldLiveOrBase(live, base.table, base.at)}),
       parsed AS MATERIALIZED (
         SELECT e.position, subject.resource
           FROM menu_sync_log_entries(ARRAY(SELECT h.data_position FROM held h WHERE NOT h.held AND h.data_position IS NOT NULL)) e
           ${subjectOf('menu_sync_jsonb(e.payload)')})
       SELECT h.id, h.sort_key, h.owner_id,
              CASE WHEN h.held THEN h.held_attributes ELSE coalesce(s.resource -> 'attributes', '{}') END AS attributes,
              CASE WHEN h.held THEN h.held_relationships ELSE coalesce(s.resource -> 'relationships', '{}') END AS relationships,
              h.deleted, h.occurred_at, h.event_id, h.position
         FROM held h LEFT JOIN parsed s ON s.position = h.data_position AND NOT h.held
        ORDER BY h.sort_key`;

const heldLive = (live: string) =>
  `SELECT p.*, l.id IS NOT NULL AS held, l.attributes AS held_attributes, l.relationships AS held_relationships
           FROM page p LEFT JOIN ${live} l ON l.id = p.id AND l.position = p.data_position AND NOT l.deleted`;

/**
 * As heldLive, and a row without a data position (its newest create/update up to `as_of` is
 * archived: see menuAsOfStatement) holds its archive base row's data.
 */
const heldLiveOrBase = (live: string, base: string, at: string) =>
  `SELECT p.*, l.id IS NOT NULL OR b.id IS NOT NULL AS held,
                CASE WHEN b.id IS NOT NULL THEN b.attributes ELSE l.attributes END AS held_attributes,
                CASE WHEN b.id IS NOT NULL THEN b.relationships ELSE l.relationships END AS held_relationships
           FROM page p LEFT JOIN ${live} l ON l.id = p.id AND l.position = p.data_position AND NOT l.deleted
           LEFT JOIN ${base} b ON p.data_position IS NULL AND b.id = p.id AND b.data_event_id IS NOT NULL
                              AND b.data_occurred_at <= ${at}`;

/** The sessions of the menu `as_of` statements (ReadModelRepository.asOfPool); the query bench's baseline uses them too. */
export const AS_OF_SESSION_SETTINGS = { plan_cache_mode: 'force_generic_plan' };

/**
 * Reads resources from the read model, or — with `asOf` — from the log folded up to that instant
 * with the same version rule, so both answer in one shape.
 */
@Injectable()
export class ReadModelRepository implements OnApplicationShutdown {
  private readonly genericPlans: LazyPool;

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    this.genericPlans = new LazyPool(dataSource, { application_name: 'menu-sync as_of' }, AS_OF_SESSION_SETTINGS);
  }

  /**
   * The menu `as_of` statements' pool (created on first use; as many connections as the shared
   * one): its sessions plan prepared statements generically (`plan_cache_mode`). PostgreSQL's own
   * choice was a custom plan at every run for a page and a read by id (the generic plan's estimate
   * cannot see how selective `as_of` and the owner are), and planning was a third to two thirds of
   * their cost, for the same plan shape. Its own pool, so that TypeORM's statements keep PostgreSQL's choice.
   */
  private get asOfPool(): pg.Pool {
    return this.genericPlans.get();
  }

  /** Ends the `as_of` pool (after the HTTP server closed: Nest calls this hook last). */
  async onApplicationShutdown(): Promise<void> {
    await this.genericPlans.end();
  }

  /**
   * A statement on the data source's pool without TypeORM's query runner (built, broadcast to
   * subscribers and released per call): the hot reads by id and page spend a fifth less CPU.
   */
  async query<T = ResourceRow>(sql: string, params: unknown[]): Promise<T[]> {
    return (await sharedPool(this.dataSource).query(sql, params)).rows;
  }

  /** As `query`, prepared (preparedQuery): the hot reads; the menu `as_of` ones on `asOfPool`. */
  private prepared<T>(sql: string, params: unknown[], pool?: pg.Pool): Promise<T[]> {
    return preparedQuery<T>(this.dataSource, sql, params, pool);
  }

  async find(table: ResourceTable, filter: RowFilter): Promise<ResourceRow[]> {
    if (filter.asOf && table.schema === 'proj_menu') {
      const { sql, params } = this.menuAsOfStatement(table, filter, filter.asOf);
      return this.prepared(sql, params, this.asOfPool);
    }
    const { sql, params } = this.statement(table, filter);
    return this.query(sql, params);
  }

  /**
   * Menu resources as of an instant (as `find` reads them), each as its JSON text built by
   * PostgreSQL in docs/reference.md §5's shape, with the ids its to-many relationship `links` names, in
   * order: for a whole `as_of` menu, whose 20,000-odd resources the process then neither parses
   * nor serialises, only splices (as the live `/menu` does).
   */
  async findDocsAsOf(table: ResourceTable, filter: RowFilter & { asOf: Date }, links?: string): Promise<ResourceDoc[]> {
    const { sql, params } = this.menuAsOfStatement(table, filter, filter.asOf);
    const linked =
      links === undefined
        ? `'{}'::text[]`
        : `ARRAY(SELECT l.id FROM ${linkedIds('f.relationships', links)} l ORDER BY l.ord)`;
    return this.prepared<ResourceDoc>(
      `SELECT f.id, f.sort_key, f.deleted, ${resourceJson('f', table.type)}::text AS doc, ${linked} AS links
         FROM (${sql}) f ORDER BY f.sort_key`,
      params,
      this.asOfPool,
    );
  }

  /**
   * A live page, each resource as the JSON text PostgreSQL builds in docs/reference.md §5's shape, and the
   * change log's newest position, in one statement and so one snapshot (a following of the feed
   * from that position misses nothing the page lacks and repeats nothing it has): one round trip,
   * where a read-only transaction around two statements took five. The texts are written out as
   * they come: parsing each row's attributes and serialising the page again took about as much of
   * the process's CPU as the rest of the request.
   */
  async findDocsWithChangePosition(
    table: ResourceTable,
    filter: Omit<RowFilter, 'asOf'>,
  ): Promise<{ rows: ResourceDoc[]; position: ChangePosition }> {
    const { sql, params } = this.statement(table, filter, docColumns(table));
    const found = await this.prepared<
      ResourceDoc & { change_transaction_id: string | null; change_seq: string | null }
    >(
      `SELECT page.*, newest.transaction_id AS change_transaction_id, newest.seq AS change_seq
         FROM (SELECT) AS one
         LEFT JOIN (${NEWEST_CHANGE_POSITION}) AS newest ON true
         LEFT JOIN (${sql}) AS page ON true
        ORDER BY page.sort_key`,
      params,
    );
    const position = changePosition({
      transaction_id: found[0]?.change_transaction_id ?? null,
      seq: found[0]?.change_seq ?? null,
    });
    const rows = found
      .filter((row) => row.id !== null)
      .map(({ change_transaction_id: _, change_seq: __, ...row }) => row);
    return { rows, position };
  }

  /** The live resource `id` (deleted or not) as JSON text built by PostgreSQL; undefined when never seen. */
  async findDoc(table: ResourceTable, id: string, ownerIds?: readonly string[]): Promise<ResourceDoc | undefined> {
    const { sql, params } = this.statement(table, { ids: [id], includeDeleted: true, ownerIds }, docColumns(table));
    const [row] = await this.prepared<ResourceDoc>(sql, params);
    return row;
  }

  /** The statement of `find` (live, or orders `as_of`), selecting `columns` of each row (alias `r`). */
  private statement(
    table: ResourceTable,
    filter: RowFilter,
    columns = ROW_COLUMNS,
  ): { sql: string; params: unknown[] } {
    const params: unknown[] = [];
    const param = (value: unknown) => `$${params.push(value)}`;
    const source = filter.asOf ? this.ordersAsOf(table, filter, param) : `${table.schema}.${table.name}`;
    const where: string[] = [];
    if (filter.ownerId !== undefined) where.push(`owner_id = ${param(filter.ownerId)}`);
    if (filter.ownerIds !== undefined) where.push(`owner_id = ANY(${param(filter.ownerIds)}::text[])`);
    if (filter.ids !== undefined) where.push(`id = ANY(${param(filter.ids)}::text[])`);
    if (!filter.includeDeleted) where.push('NOT deleted');
    if (filter.updatedSince !== undefined) where.push(`occurred_at >= ${param(filter.updatedSince)}`);
    if (filter.afterSortKey !== undefined) where.push(`sort_key > ${param(filter.afterSortKey)}`);
    const limit = filter.limit === undefined ? '' : `LIMIT ${param(filter.limit)}`;
    const sql = `SELECT ${columns}
         FROM ${source} r ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY sort_key ${limit}`;
    return { sql, params };
  }

  /**
   * Menu resources as of an instant, at the cost of the page rather than of the log: candidate ids
   * are walked in id order — the live table's rows (every id that reached the projector, deleted
   * ones too) and the ids of log entries past the projector's checkpoint (usually none; found by
   * `menu_sync_unprojected_menu_ids` in the same statement, so one round trip) — and for each, the newest
   * event up to then (not parked) is the live row's own when that row is no newer than `as_of` (and
   * no unread entry names it), else one backward step in `event_log_subject_version_idx`; it decides
   * version, owner and `deleted`. Only the rows of the page read their newest create/update's
   * attributes and relationships: from the live row when that event is the one it holds (nothing
   * changed since `as_of`: the usual case for the recent past), else parsed from the event's
   * payload; a payload that jsonb refuses reads as no attributes rather than failing the request.
   * Those entries are read together by `menu_sync_log_entries`, which prefetches their pages:
   * scattered over the log, one index step each, they were most of a cold `as_of` menu.
   * Limitation: the owner filter takes candidates by their live owner, so an id that belonged to
   * the owner at `as_of` but to another one now is not listed under it.
   */
  private menuAsOfStatement(table: ResourceTable, filter: RowFilter, asOf: Date): { sql: string; params: unknown[] } {
    const live = `${table.schema}.${table.name}`;
    const params: unknown[] = [];
    const param = (value: unknown) => `$${params.push(value)}`;
    const type = param(table.type);
    const at = param(asOf);
    const owner = filter.ownerId === undefined ? undefined : param(filter.ownerId);
    const ids = filter.ids === undefined ? undefined : param(filter.ids);
    const after = filter.afterSortKey === undefined ? undefined : param(filter.afterSortKey);
    const candidate = [
      ...(owner === undefined ? [] : [`c.owner_id = ${owner}`]),
      ...(ids === undefined ? [] : [`c.id = ANY(${ids}::text[])`]),
      ...(after === undefined ? [] : [`c.sort_key > ${after}`]),
    ];
    const where = (conditions: string[]) => (conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '');
    const kept = [
      ...(filter.includeDeleted ? [] : ['NOT n.deleted']),
      ...(owner === undefined ? [] : [`n.owner_id = ${owner}`]),
      ...(filter.ownerIds === undefined ? [] : [`n.owner_id = ANY(${param(filter.ownerIds)}::text[])`]),
      ...(filter.updatedSince === undefined ? [] : [`n.occurred_at >= ${param(filter.updatedSince)}`]),
    ];
    const limit = filter.limit === undefined ? '' : `LIMIT ${param(filter.limit)}`;
    const kinds = (list: string[]) => `e.event_type IN (${list.map((kind) => `'${table.type}.${kind}'`).join(', ')})`;
    const inLog = (id: string, events: string, extra = '') => `
      SELECT e.owner_id, e.occurred_at, e.event_id, e.position, e.event_type LIKE '%.destroyed' AS deleted${extra}
        FROM event_log e
       WHERE e.subject_type = ${type} AND ${sameSubject('e.subject_id', id)} AND e.occurred_at <= ${at} AND ${events}
         AND ${notParked(table)}
       ORDER BY ${NEWEST_INDEXED} LIMIT 1`;
    const base = filter.archiveBase ? `${archiveBaseOf(table.schema)}.${table.name}` : undefined;
    // With an archive base, the newer of the log's newest event and the base row's version (or, for
    // the data, its newest create/update, at no position: heldLiveOrBase reads it from the base row).
    const newest = (id: string, events: string, data = false) =>
      base === undefined
        ? inLog(id, events)
        : `
      SELECT u.owner_id, u.occurred_at, u.event_id, u.position, u.deleted, u.in_base FROM (
        (${inLog(id, events, `, coalesce(e.event_seq, '-Infinity') AS event_seq, false AS in_base`)})
        UNION ALL
        ${
          data
            ? `SELECT b.owner_id, b.data_occurred_at, b.data_event_id, NULL::bigint, false, b.data_event_seq, true
                 FROM ${base} b WHERE b.id = ${id} AND b.data_event_id IS NOT NULL AND b.data_occurred_at <= ${at}`
            : `SELECT b.owner_id, b.occurred_at, b.event_id, b.position, b.deleted, b.event_seq, true
                 FROM ${base} b WHERE b.id = ${id} AND b.occurred_at <= ${at}`
        }) u
       ORDER BY u.occurred_at DESC, u.event_seq DESC, u.event_id COLLATE "C" DESC LIMIT 1`;
    // Each candidate (alias c) with its newest event up to as_of (n), kept or not, in id order.
    const walk = (candidates: string, conditions: string[], newestEvent: string) => `(
         SELECT c.id, c.sort_key, n.*,
                CASE WHEN n.deleted THEN (SELECT d.position FROM (${newest('c.id', kinds(['created', 'updated']), true)}) d)
                     ${base === undefined ? '' : 'WHEN n.in_base THEN NULL'} ELSE n.position END AS data_position
           FROM ${candidates} CROSS JOIN LATERAL (${newestEvent}) n
          ${where([...conditions, ...kept])}
          ORDER BY c.sort_key ${limit})`;
    const allKinds = kinds(['created', 'updated', 'destroyed']);
    // A live row no newer than as_of holds the newest event up to then (it holds the newest of all
    // the projector applied), unless entries past the checkpoint name its id: no lookup for it.
    const liveOrNewest = `
         SELECT c.owner_id, c.occurred_at, c.event_id, c.position, c.deleted${base === undefined ? '' : ', false AS in_base'}
          WHERE c.occurred_at <= ${at} AND NOT EXISTS (SELECT 1 FROM tail WHERE tail.id = c.id)
         UNION ALL (${newest('c.id', allKinds)})
         LIMIT 1`;
    // Ids only in entries the projector has not read yet (usually none). Walked apart from the live
    // ones and merged after: in one walk over both, the planner gave up the ordered index scan that
    // stops after a page, and walked every id of the owner.
    const unprojected = `(
         SELECT tail.id, ${menuSortKey('tail.id')} AS sort_key FROM tail
          WHERE ${after === undefined ? 'true' : `${menuSortKey('tail.id')} > ${after}`}
            AND NOT EXISTS (SELECT 1 FROM ${live} c WHERE ${[sameSubject('c.id', 'tail.id'), ...candidate].join(' AND ')})) c`;
    return {
      sql: `WITH tail AS MATERIALIZED (
         SELECT t.id FROM menu_sync_unprojected_menu_ids(${type}, ${owner ?? 'NULL'}, ${ids === undefined ? 'NULL' : `${ids}::text[]`}) AS t(id)),
       page AS MATERIALIZED (
         SELECT w.* FROM (${walk(`${live} c`, candidate, liveOrNewest)} UNION ALL ${walk(unprojected, [], newest('c.id', allKinds))}) w
          ORDER BY w.sort_key ${limit}),
       ${pageResources(live, base === undefined ? undefined : { table: base, at })}`,
      params,
    };
  }

  /** Order resources as of an instant: folded from the order events' `included`. */
  private ordersAsOf(table: ResourceTable, filter: RowFilter, param: (value: unknown) => string): string {
    const at = param(filter.asOf);
    const inLog = ORDERS_PROJECTION.changes(
      `e.occurred_at <= ${at} AND ${notParked(table)}`,
      'menu_sync_jsonb(e.payload)',
    );
    // The archive base row holds the newest archived version of each: in the fold with the log's.
    const changes = filter.archiveBase
      ? `${inLog}
      UNION ALL
      SELECT '${table.type}', id, owner_id, occurred_at, event_seq, event_id, position, deleted, false, attributes, relationships
        FROM ${archiveBaseOf(table.schema)}.${table.name} WHERE occurred_at <= ${at}`
      : inLog;
    const ofType = `type = ${param(table.type)}`;
    return `(
      WITH changes (${CHANGE_COLUMNS}) AS (${changes})
      SELECT DISTINCT ON (id) id, menu_sync_sort_key(id) AS sort_key, owner_id, attributes, relationships, deleted,
             occurred_at, event_id, position
        FROM changes WHERE ${ofType} ORDER BY id, ${NEWEST_FIRST})`;
  }
}

import { Inject, Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { AdvisoryLock, advisoryLocks, lockStatement, pgLocksMatch } from '../database/advisory-locks.js';
import { queryBatch } from '../database/postgres-connection.js';
import { isDataError } from '../database/database-errors.js';
import type { LogCheckpoint } from '../event-log/log-entry.js';
import { ownerVersionsCte } from './owner-versions.js';
import { CHANGE_COLUMNS, NEWEST_FIRST, ProjectionDefinition } from './projection-definitions.js';
import { MENU_RESOURCE_TYPES, notifiedSql, publishedChangesSql } from './published-changes.js';

/**
 * Entries per page while catching up (live pages hold what arrived since the last). Large pages
 * write a resource's row and its change once for all its events in the page: 500k against 200k
 * took a 1M-event catch-up with the change log from 28.6 s to 18.6 s (without it, 18.4 s to 14.1 s).
 * The price is PostgreSQL's memory for the page's sorts, up to about 4 × 90 MB (work_mem, see prepare).
 */
export const PAGE_ENTRIES = 500_000;

/** The resource types whose changes the live projection writes to the change log (CHANGES_TYPES). */
export const CHANGES_TYPES = Symbol('CHANGES_TYPES');

export interface PageResult {
  /** Log entries the page covered (applied, skipped as irrelevant, or parked). */
  entries: number;
  parked: number;
  checkpoint: LogCheckpoint;
}

export interface ProjectionStatus {
  checkpoint: LogCheckpoint;
  applied: number;
  parked: number;
  lastError: string | null;
}

/** The entries of a page: after ($1, $2) up to ($3, $4) in (transaction id, position) order. */
const RANGE = `e.transaction_id BETWEEN $1::xid8 AND $3::xid8
      AND (e.transaction_id, e.position) > ($1::xid8, $2::bigint) AND (e.transaction_id, e.position) <= ($3::xid8, $4::bigint)`;
const VERSION = (alias: string, prefix = '') => `(${alias}.${prefix}occurred_at, ${alias}.${prefix}event_seq, ${alias}.${prefix}event_id)`;
/** What pageBoundsSql answers: where the page starts (the checkpoint) and ends, its entries, and how many the projection reads. */
interface PageBounds {
  from_transaction_id: string;
  from_position: string;
  transaction_id: string | null;
  position: string | null;
  entries: number;
  relevant: number;
}

/**
 * The next page of `schema`'s projection: its checkpoint and the last of up to `limit` entries after
 * it (not beyond `until`), below the log's horizon. Literal SQL (what it inlines is checked) so that
 * it can travel in a batch with the page's opening statements.
 */
function pageBoundsSql(projection: ProjectionDefinition, schema: string, limit: number, until?: LogCheckpoint): string {
  const bound = until === undefined ? '' : `AND (e.transaction_id, e.position) <= ('${digits(until.transactionId)}'::xid8, ${digits(until.position)})`;
  return `SELECT c.transaction_id::text AS from_transaction_id, c.position::text AS from_position,
                 p.transaction_id::text AS transaction_id, p.position::text AS position,
                 coalesce(p.entries, 0) AS entries, coalesce(p.relevant, 0) AS relevant
            FROM ${schema}.checkpoint c LEFT JOIN LATERAL (
              SELECT page.transaction_id, page.position, count(*) OVER ()::int AS entries,
                     (count(*) FILTER (WHERE page.relevant) OVER ())::int AS relevant
                FROM (SELECT e.transaction_id, e.position, ${projection.events} AS relevant FROM event_log e
                       WHERE (e.transaction_id, e.position) > (c.transaction_id, c.position)
                         AND e.transaction_id < (SELECT event_log_horizon()) ${bound}
                       ORDER BY e.transaction_id, e.position LIMIT ${Math.trunc(limit)}) AS page
               ORDER BY page.transaction_id DESC, page.position DESC LIMIT 1) AS p ON true`;
}

function digits(value: string): string {
  if (!/^\d+$/.test(value)) throw new Error(`not a log position: ${value}`);
  return value;
}

/** Up to this many entries, a page looks rows up by id; beyond, it joins whole tables (see ownerVersionsCte). */
const SMALL_PAGE_ENTRIES = 5_000;

/**
 * Applies the event log to a projection's tables inside PostgreSQL, page by page: the page's
 * resource changes are extracted into a temporary table, then each resource table takes, per id,
 * the newest change of the page when it is newer than the row (CONTRACT §4). The checkpoint moves
 * in the same transaction, and only from where this projector last left it.
 */
@Injectable()
export class ProjectionRepository {
  private readonly published: ReadonlySet<string>;

  constructor(@InjectDataSource() private readonly dataSource: DataSource,
    @Optional() @Inject(CHANGES_TYPES) publishedTypes: readonly string[] = MENU_RESOURCE_TYPES) {
    this.published = new Set(publishedTypes);
  }

  /** The types of `projection` whose changes go to the change log. */
  publishedTypes(projection: ProjectionDefinition): string[] {
    return projection.tables.filter(({ type }) => this.published.has(type)).map(({ type }) => type);
  }

  /**
   * Prepares a dedicated connection for applyPage: a page's changes are held in memory; and the
   * planner, which cannot estimate the page's row count (a CTE over a row-comparison range), must
   * not pick nested loops between its parts (seen: 138 million rows filtered for one page) nor
   * read the whole log for a page's destroys, nor JIT-compile (the inflated costs trigger it).
   */
  async prepare(runner: QueryRunner): Promise<void> {
    await runner.query(`SET work_mem = '128MB'`);
    await runner.query(`SET enable_nestloop = off`);
    await runner.query(`SET enable_seqscan = off`);
    await runner.query(`SET jit = off`);
  }

  async checkpoint(runner: QueryRunner | DataSource, projection: ProjectionDefinition, schema = projection.schema): Promise<LogCheckpoint> {
    const [row] = await runner.query(
      `SELECT transaction_id::text AS transaction_id, position::text AS position FROM ${schema}.checkpoint`);
    return { transactionId: row.transaction_id, position: row.position };
  }

  /**
   * Applies up to `limit` log entries after the checkpoint in its own transaction. A live page
   * (schema = the projection's own) first takes the projection's transaction lock, so a rebuild
   * swapping the schema (see RebuildService) never interleaves with it. The transaction's opening
   * (its locks, the page's bounds and the savepoint) is one round trip, and the page four in all:
   * the live projector shares its process with ingress and the API, where every round trip waits
   * its turn on a busy event loop, and at ten round trips a page of a few deliveries took 250 ms.
   */
  async applyPage(runner: QueryRunner, projection: ProjectionDefinition, limit: number, schema = projection.schema,
    until?: LogCheckpoint): Promise<PageResult> {
    const locks = schema === projection.schema ? this.liveLocks(projection) : [];
    try {
      const opened = await queryBatch(runner, ['BEGIN', ...locks, pageBoundsSql(projection, schema, limit, until), 'SAVEPOINT page']);
      const { page, moveCheckpoint } = await this.applyBounds(runner, projection, schema, opened[locks.length + 1].rows[0]);
      await queryBatch(runner, [...moveCheckpoint, 'COMMIT']);
      return page;
    } catch (error) {
      await queryBatch(runner, ['ROLLBACK']).catch(() => undefined);
      throw error;
    }
  }

  /** Serialises live pages of a projection with a swap of its schema; held until the transaction ends. */
  async lockLive(runner: QueryRunner, projection: ProjectionDefinition): Promise<void> {
    await queryBatch(runner, this.liveLocks(projection));
  }

  /** The statements taking a live page's transaction locks: the projection's, then (when it publishes) the change log writer's. */
  private liveLocks(projection: ProjectionDefinition): string[] {
    const locks = [lockStatement('pg_advisory_xact_lock', advisoryLocks.inSpace('projectionPage', projection.lockKey))];
    if (this.publishedTypes(projection).length > 0) locks.push(lockStatement('pg_advisory_xact_lock', advisoryLocks.single('changeLogWriter')));
    return locks;
  }

  /**
   * Applies up to `limit` entries after the checkpoint of `schema` (and not beyond `until`), gap-safely
   * (see EventLogRepository.readAfter), within the caller's transaction. An entry that cannot be
   * applied is parked with its error and the rest of the page still applies.
   */
  async applyPageInTransaction(runner: QueryRunner, projection: ProjectionDefinition, limit: number, schema: string,
    until?: LogCheckpoint): Promise<PageResult> {
    const [bounds] = await runner.query(pageBoundsSql(projection, schema, limit, until));
    await runner.query('SAVEPOINT page');
    const { page, moveCheckpoint } = await this.applyBounds(runner, projection, schema, bounds);
    if (moveCheckpoint.length > 0) await queryBatch(runner, moveCheckpoint);
    return page;
  }

  /**
   * Applies the page `bounds` found, after the savepoint `page`. Answers the statement that moves the
   * checkpoint, for the caller to send with what ends its transaction: it fails, and so ends the
   * transaction in error, when the checkpoint is no longer where the page began.
   */
  private async applyBounds(runner: QueryRunner, projection: ProjectionDefinition, schema: string,
    bounds: PageBounds): Promise<{ page: PageResult; moveCheckpoint: string[] }> {
    const from: LogCheckpoint = { transactionId: bounds.from_transaction_id, position: bounds.from_position };
    if (bounds.entries === 0) return { page: { entries: 0, parked: 0, checkpoint: from }, moveCheckpoint: [] };
    const to: LogCheckpoint = { transactionId: bounds.transaction_id!, position: bounds.position! };
    let parked = 0;
    try {
      if (bounds.relevant > 0) parked = await this.applyRange(runner, projection, schema, from, to, bounds.entries);
    } catch (error) {
      await runner.query('ROLLBACK TO SAVEPOINT page');
      if (!isDataError(error)) throw error;
      parked = await this.applyBisecting(runner, projection, schema, from, await this.keys(runner, from, to), 0);
    }
    const moveCheckpoint = `DO $$ BEGIN
        UPDATE ${schema}.checkpoint SET transaction_id = '${digits(to.transactionId)}'::xid8, position = ${digits(to.position)},
               applied = applied + ${bounds.entries}, updated_at = now()
         WHERE transaction_id = '${digits(from.transactionId)}'::xid8 AND position = ${digits(from.position)};
        IF NOT FOUND THEN RAISE EXCEPTION 'the ${projection.name} checkpoint moved under this projector'; END IF;
      END $$`;
    return { page: { entries: bounds.entries, parked, checkpoint: to }, moveCheckpoint: [moveCheckpoint] };
  }

  private async keys(runner: QueryRunner, from: LogCheckpoint, to: LogCheckpoint): Promise<LogCheckpoint[]> {
    const rows: Array<{ transaction_id: string; position: string }> = await runner.query(
      `SELECT e.transaction_id::text AS transaction_id, e.position::text AS position FROM event_log e
        WHERE (e.transaction_id, e.position) > ($1::xid8, $2::bigint) AND (e.transaction_id, e.position) <= ($3::xid8, $4::bigint)
        ORDER BY e.transaction_id, e.position`, [from.transactionId, from.position, to.transactionId, to.position]);
    return rows.map((row) => ({ transactionId: row.transaction_id, position: row.position }));
  }

  /**
   * Slow path for a range the database refused as a whole (an event whose payload jsonb rejects, say):
   * each half is tried under its own savepoint, down to the single entries that fail, which are parked
   * with their error. One bad event in a page of n costs about 2·log2(n) attempts, not n.
   */
  private async applyBisecting(runner: QueryRunner, projection: ProjectionDefinition, schema: string, from: LogCheckpoint,
    keys: LogCheckpoint[], depth: number): Promise<number> {
    const half = Math.ceil(keys.length / 2);
    let parked = 0;
    let start = from;
    for (const part of keys.length === 1 ? [keys] : [keys.slice(0, half), keys.slice(half)]) {
      const savepoint = `bisect_${depth}`;
      await runner.query(`SAVEPOINT ${savepoint}`);
      try {
        parked += await this.applyRange(runner, projection, schema, start, part[part.length - 1], part.length);
        await runner.query(`RELEASE SAVEPOINT ${savepoint}`);
      } catch (error) {
        await runner.query(`ROLLBACK TO SAVEPOINT ${savepoint}`);
        if (!isDataError(error)) throw error;
        if (part.length > 1) {
          parked += await this.applyBisecting(runner, projection, schema, start, part, depth + 1);
        } else {
          await runner.query(
            `INSERT INTO ${schema}.parked_events (position, event_id, error)
             SELECT position, event_id, $2 FROM event_log WHERE position = $1 ON CONFLICT (position) DO NOTHING`,
            [part[0].position, errorText(error)]);
          parked++;
        }
      }
      start = part[part.length - 1];
    }
    return parked;
  }

  /**
   * One statement: the range's changes are extracted once (a materialized CTE), missing subjects
   * parked, and every table upserted by its own data-modifying CTE. A projection with `winners`
   * first tries the cheaper statement that parses only the winning events' payloads.
   */
  private async applyRange(runner: QueryRunner, projection: ProjectionDefinition, schema: string, from: LogCheckpoint,
    to: LogCheckpoint, entries: number): Promise<number> {
    const smallPage = entries <= SMALL_PAGE_ENTRIES;
    const params = [from.transactionId, from.position, to.transactionId, to.position];
    // Only the live projection publishes: a rebuild's shadow publishes at its swap, and only what differs.
    const published = schema === projection.schema ? new Set(this.publishedTypes(projection)) : new Set<string>();
    if (projection.winners !== undefined) {
      const [fast] = await runner.query(winnersSql(projection, schema, published, smallPage), params);
      // A winner without its subject would have to give way to the next newest: the full statement sorts that out.
      if (fast.missing === 0) return 0;
    }
    const upserts = projection.tables.map(({ type, table }) => published.has(type)
      ? publishedChangesSql(schema, table, type, `SELECT id FROM changes WHERE type = '${type}' AND NOT missing`,
        upsertSql(`${schema}.${table}`, type))
      : `${table} AS (${upsertSql(`${schema}.${table}`, type)}
         RETURNING t.id, t.owner_id)`);
    const [row] = await runner.query(
      `WITH changes (${CHANGE_COLUMNS}) AS MATERIALIZED (${projection.changes(RANGE)}),
       parked AS (
         INSERT INTO ${schema}.parked_events (position, event_id, error)
         SELECT DISTINCT position, event_id, $5 FROM changes WHERE missing
         ON CONFLICT (position) DO NOTHING RETURNING 1),
       ${upserts.join(',\n       ')}${ownerVersionsCte(projection, schema, publishedTables(projection, published), smallPage)},
       ${notifiedSql([...publishedTables(projection, published)])}
       SELECT (SELECT count(*) FROM parked)::int AS parked, (SELECT count(*) FROM notified)::int AS notified`,
      [...params, projection.missingError]);
    return row.parked;
  }

  /**
   * Applies each parked entry of the live projection again (reconcile does this): one that now
   * applies leaves the parked list; one that fails again stays, with its new error. Returns how
   * many were released. Each entry has its own short transaction: the live projection's lock and
   * the transaction id (which holds event_log_horizon() back for every reader) are held for one
   * entry at a time, never across the whole list.
   */
  async retryParked(runner: QueryRunner, projection: ProjectionDefinition): Promise<{ retried: number; released: number }> {
    const parked: Array<{ transaction_id: string; position: string }> = await runner.query(
      `SELECT e.transaction_id::text AS transaction_id, e.position::text AS position
         FROM ${projection.schema}.parked_events p JOIN event_log e ON e.position = p.position
        ORDER BY e.transaction_id, e.position`);
    let released = 0;
    for (const entry of parked) {
      if (await this.retryOne(runner, projection, entry)) released++;
    }
    return { retried: parked.length, released };
  }

  /** One parked entry, in its own transaction: true when it applied. A data error rolls back and records the new error. */
  private async retryOne(runner: QueryRunner, projection: ProjectionDefinition, entry: { transaction_id: string; position: string }): Promise<boolean> {
    const at: LogCheckpoint = { transactionId: entry.transaction_id, position: entry.position };
    const before: LogCheckpoint = { transactionId: entry.transaction_id, position: String(BigInt(entry.position) - 1n) };
    await runner.startTransaction();
    try {
      await this.lockLive(runner, projection);
      // Gone meanwhile (a rebuild swapped the schema in, say): nothing to retry.
      const deleted = await runner.query(`DELETE FROM ${projection.schema}.parked_events WHERE position = $1`, [entry.position], true);
      const parkedAgain = deleted.affected === 0 ? 1 : await this.applyRange(runner, projection, projection.schema, before, at, 1);
      await runner.commitTransaction();
      return parkedAgain === 0;
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      if (!isDataError(error)) throw error;
      await runner.query(`UPDATE ${projection.schema}.parked_events SET error = $2, parked_at = now() WHERE position = $1`,
        [entry.position, errorText(error)]);
      return false;
    }
  }

  /** Whether some session on this database holds the session advisory lock `key` (as ProjectorService takes it). */
  async advisoryLockHeld(lock: AdvisoryLock): Promise<boolean> {
    const [match, params] = pgLocksMatch(lock);
    const [{ held }] = await this.dataSource.query(
      `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                        WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted
                          AND ${match}) AS held`, params);
    return held;
  }

  async status(projection: ProjectionDefinition): Promise<ProjectionStatus> {
    const [row] = await this.dataSource.query(
      `SELECT c.transaction_id::text AS transaction_id, c.position::text AS position, c.applied::text AS applied,
              (SELECT count(*) FROM ${projection.schema}.parked_events)::int AS parked,
              (SELECT error FROM ${projection.schema}.parked_events ORDER BY parked_at DESC, position DESC LIMIT 1) AS last_error
         FROM ${projection.schema}.checkpoint c`);
    return {
      checkpoint: { transactionId: row.transaction_id, position: row.position },
      applied: Number(row.applied),
      parked: row.parked,
      lastError: row.last_error,
    };
  }

  /** The parked entries of a projection, newest first. */
  async parked(projection: ProjectionDefinition, limit: number): Promise<Array<{ position: number; eventId: string; error: string; parkedAt: Date }>> {
    const rows: Array<{ position: string; event_id: string; error: string; parked_at: Date }> = await this.dataSource.query(
      `SELECT p.position::text AS position, p.event_id, p.error, p.parked_at FROM ${projection.schema}.parked_events p
        ORDER BY p.position DESC LIMIT $1`, [limit]);
    return rows.map((row) => ({ position: Number(row.position), eventId: row.event_id, error: row.error, parkedAt: row.parked_at }));
  }

  /** Log entries not yet read by a reader at `checkpoint`. */
  async lag(checkpoint: LogCheckpoint): Promise<number> {
    const [row] = await this.dataSource.query(
      `SELECT count(*)::int AS lag FROM event_log WHERE (transaction_id, position) > ($1::xid8, $2::bigint)`,
      [checkpoint.transactionId, checkpoint.position]);
    return row.lag;
  }
}

const ROW_COLUMNS = `id, owner_id, attributes, relationships, deleted, occurred_at, event_seq, event_id, position,
                               data_occurred_at, data_event_seq, data_event_id`;

/** Writes a row's newest change (version, `deleted`) and newest create/update (attributes) only when newer than the row's. */
function onConflict(): string {
  const newer = `${VERSION('excluded')} > ${VERSION('t')}`;
  const newerData = `excluded.data_event_id IS NOT NULL AND (t.data_event_id IS NULL OR ${VERSION('excluded', 'data_')} > ${VERSION('t', 'data_')})`;
  const pick = (column: string, condition: string) => `${column} = CASE WHEN ${condition} THEN excluded.${column} ELSE t.${column} END`;
  return `ON CONFLICT (id) DO UPDATE SET
      ${['owner_id', 'deleted', 'occurred_at', 'event_seq', 'event_id', 'position'].map((c) => pick(c, newer)).join(',\n      ')},
      ${['attributes', 'relationships', 'data_occurred_at', 'data_event_seq', 'data_event_id'].map((c) => pick(c, newerData)).join(',\n      ')}
    WHERE ${newer} OR (${newerData})`;
}

/**
 * Per id, the range's newest change (deciding version and `deleted`) and its newest create/update
 * (deciding attributes) are written when newer than what the row has.
 */
function upsertSql(table: string, type: string): string {
  const ofType = `type = '${type}' AND NOT missing`;
  return `
    INSERT INTO ${table} AS t (${ROW_COLUMNS})
    SELECT v.id, v.owner_id, coalesce(d.attributes, '{}'), coalesce(d.relationships, '{}'), v.deleted, v.occurred_at,
           v.event_seq, v.event_id, v.position, d.occurred_at, d.event_seq, d.event_id
      FROM (SELECT DISTINCT ON (id) id, owner_id, deleted, occurred_at, event_seq, event_id, position
              FROM changes WHERE ${ofType} ORDER BY id, ${NEWEST_FIRST}) v
      LEFT JOIN (SELECT DISTINCT ON (id) id, attributes, relationships, occurred_at, event_seq, event_id
                   FROM changes WHERE ${ofType} AND NOT deleted ORDER BY id, ${NEWEST_FIRST}) d USING (id)
    ${onConflict()}`;
}

/**
 * The same page by winners: the versions are sorted without payloads, and only each id's newest
 * create/update is parsed (by position). Nothing is written when a winner lacks its subject
 * (`missing` > 0): the caller then applies the page with the full statement.
 */
function winnersSql(projection: ProjectionDefinition, schema: string, published: ReadonlySet<string>, smallPage: boolean): string {
  const newest = `ORDER BY type, id, ${NEWEST_FIRST}`;
  const upserts = projection.tables.map(({ type, table }) => {
    const upsert = `
    INSERT INTO ${schema}.${table} AS t (${ROW_COLUMNS})
    SELECT v.id, v.owner_id, coalesce(r.attributes, '{}'), coalesce(r.relationships, '{}'), v.deleted, v.occurred_at,
           v.event_seq, v.event_id, v.position, w.occurred_at, w.event_seq, w.event_id
      FROM newest v LEFT JOIN newest_data w USING (type, id) LEFT JOIN resources r USING (type, id)
     WHERE v.type = '${type}' AND (SELECT complete FROM checked)
    ${onConflict()}`;
    return published.has(type)
      ? publishedChangesSql(schema, table, type, `SELECT id FROM newest WHERE type = '${type}'`, upsert)
      : `${table} AS (${upsert}
         RETURNING t.id, t.owner_id)`;
  });
  return `WITH versions (type, id, owner_id, occurred_at, event_seq, event_id, position, deleted) AS MATERIALIZED (${projection.winners!.versions(RANGE)}),
       newest AS MATERIALIZED (SELECT DISTINCT ON (type, id) * FROM versions ${newest}),
       newest_data AS MATERIALIZED (SELECT DISTINCT ON (type, id) * FROM versions WHERE NOT deleted ${newest}),
       resources (type, id, missing, attributes, relationships) AS MATERIALIZED (
         ${projection.winners!.resources('ARRAY(SELECT position FROM newest_data)')}),
       checked AS (SELECT NOT EXISTS (SELECT 1 FROM resources WHERE missing) AS complete),
       ${upserts.join(',\n       ')}${ownerVersionsCte(projection, schema, publishedTables(projection, published), smallPage)},
       ${notifiedSql([...publishedTables(projection, published)])}
       SELECT (SELECT count(*) FROM resources WHERE missing)::int AS missing, (SELECT count(*) FROM notified)::int AS notified`;
}

/** The tables of `projection` whose statement CTEs publish changes (and so have a `<table>_before`). */
function publishedTables(projection: ProjectionDefinition, published: ReadonlySet<string>): ReadonlySet<string> {
  return new Set(projection.tables.filter(({ type }) => published.has(type)).map(({ table }) => table));
}

function errorText(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 1000);
}

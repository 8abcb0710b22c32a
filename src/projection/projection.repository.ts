import { Inject, Injectable, Optional } from '@nestjs/common';
import type { DataSource, QueryRunner } from 'typeorm';
import { advisoryLocks, lockStatement } from '../database/advisory-locks.js';
import { preparedOn, queryBatch } from '../database/postgres-connection.js';
import { isDataError } from '../database/database-errors.js';
import type { LogCheckpoint } from '../event-log/log-entry.js';
import {
  moveCheckpointSql,
  PageBounds,
  pageBoundsSql,
  rangeSql,
  SMALL_PAGE_ENTRIES,
  winnersSql,
  withLiterals,
} from './page-statements.js';
import type { ProjectionDefinition } from './projection-definitions.js';
import { MENU_RESOURCE_TYPES } from './published-changes.js';

/**
 * Entries per page while catching up (live pages hold what arrived since the last). Large pages
 * write a resource's row and its change, and parse its winning payload, once for all its events in
 * the page, instead of once per smaller page. The price: the page's transaction holds the readers'
 * horizon (sinks and feeds wait for it), and its sort spills to disk beyond work_mem (see prepare).
 */
export const PAGE_ENTRIES = 1_000_000;

/** The resource types whose changes the live projection writes to the change log (CHANGES_TYPES). */
export const CHANGES_TYPES = Symbol('CHANGES_TYPES');

export interface PageResult {
  /** Log entries the page covered (applied, skipped as irrelevant, or parked). */
  entries: number;
  /** Of those, the entries of the types the projection reads. */
  relevant: number;
  parked: number;
  checkpoint: LogCheckpoint;
}

/**
 * Applies the event log to a projection's tables inside PostgreSQL, page by page (the statements
 * are page-statements.ts): each resource table takes, per id, the newest change of the page when
 * it is newer than the row (docs/reference.md §4). The checkpoint moves in the same transaction, and only
 * from where this projector last left it. A page the database refuses is bisected down to the
 * entries at fault, which are parked; reconcile retries them. Status and lag are
 * ProjectionStatusRepository's.
 */
@Injectable()
export class ProjectionRepository {
  private readonly published: ReadonlySet<string>;

  constructor(@Optional() @Inject(CHANGES_TYPES) publishedTypes: readonly string[] = MENU_RESOURCE_TYPES) {
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

  /**
   * prepare, for a projector lane's session, whose small pages (live ones, a few deliveries each)
   * run as prepared statements with a generic plan: parsing and planning the page statement cost
   * more than running it, on every page. Its plan barely depends on the range (nested loops and
   * sequential scans are off, the lookups go by id), while PostgreSQL's own choice would stay with
   * custom plans, whose estimated cost the generic one's range guess exceeds. Large pages (a
   * catch-up) carry their range as literals, so they are planned for it.
   */
  async prepareLane(runner: QueryRunner): Promise<void> {
    await this.prepare(runner);
    await runner.query(`SET plan_cache_mode = force_generic_plan`);
  }

  async checkpoint(
    runner: QueryRunner | DataSource,
    projection: ProjectionDefinition,
    schema = projection.schema,
  ): Promise<LogCheckpoint> {
    const [row] = await runner.query(
      `SELECT transaction_id::text AS transaction_id, position::text AS position FROM ${schema}.checkpoint`,
    );
    return { transactionId: row.transaction_id, position: row.position };
  }

  /**
   * Applies up to `limit` log entries after the checkpoint in its own transaction. A live page
   * (schema = the projection's own) first takes the projection's transaction lock, so a rebuild
   * swapping the schema (see RebuildService) never interleaves with it. The transaction's opening
   * (its locks, the page's bounds and the savepoint) is one round trip, and the page four in all:
   * the live projector shares its process with ingress and the API, where every round trip waits
   * its turn on a busy event loop, so each round trip saved shortens every page.
   */
  async applyPage(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    limit: number,
    schema = projection.schema,
    until?: LogCheckpoint,
  ): Promise<PageResult> {
    const locks = schema === projection.schema ? this.liveLocks(projection) : [];
    try {
      const opened = await queryBatch(runner, [
        'BEGIN',
        ...locks,
        pageBoundsSql(projection, schema, limit, until),
        'SAVEPOINT page',
      ]);
      const { page, moveCheckpoint } = await this.applyBounds(
        runner,
        projection,
        schema,
        opened[locks.length + 1].rows[0],
      );
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
    if (this.publishedTypes(projection).length > 0)
      locks.push(lockStatement('pg_advisory_xact_lock', advisoryLocks.single('changeLogWriter')));
    return locks;
  }

  /**
   * Applies up to `limit` entries after the checkpoint of `schema` (and not beyond `until`), gap-safely
   * (see EventLogRepository.readAfter), within the caller's transaction. An entry that cannot be
   * applied is parked with its error and the rest of the page still applies.
   */
  async applyPageInTransaction(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    limit: number,
    schema: string,
    until?: LogCheckpoint,
  ): Promise<PageResult> {
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
  private async applyBounds(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    schema: string,
    bounds: PageBounds,
  ): Promise<{ page: PageResult; moveCheckpoint: string[] }> {
    const from: LogCheckpoint = { transactionId: bounds.from_transaction_id, position: bounds.from_position };
    if (bounds.entries === 0)
      return { page: { entries: 0, relevant: 0, parked: 0, checkpoint: from }, moveCheckpoint: [] };
    const to: LogCheckpoint = { transactionId: bounds.transaction_id!, position: bounds.position! };
    let parked = 0;
    try {
      if (bounds.relevant > 0) parked = await this.applyRange(runner, projection, schema, from, to, bounds.entries);
    } catch (error) {
      await runner.query('ROLLBACK TO SAVEPOINT page');
      if (!isDataError(error)) throw error;
      parked = await this.applyBisecting(runner, projection, schema, from, await this.keys(runner, from, to), 0);
    }
    const moveCheckpoint = moveCheckpointSql(projection, schema, from, to, bounds.entries);
    return {
      page: { entries: bounds.entries, relevant: bounds.relevant, parked, checkpoint: to },
      moveCheckpoint: [moveCheckpoint],
    };
  }

  private async keys(runner: QueryRunner, from: LogCheckpoint, to: LogCheckpoint): Promise<LogCheckpoint[]> {
    const rows: Array<{ transaction_id: string; position: string }> = await runner.query(
      `SELECT e.transaction_id::text AS transaction_id, e.position::text AS position FROM event_log e
        WHERE (e.transaction_id, e.position) > ($1::xid8, $2::bigint) AND (e.transaction_id, e.position) <= ($3::xid8, $4::bigint)
        ORDER BY e.transaction_id, e.position`,
      [from.transactionId, from.position, to.transactionId, to.position],
    );
    return rows.map((row) => ({ transactionId: row.transaction_id, position: row.position }));
  }

  /**
   * Slow path for a range the database refused as a whole (an event whose payload jsonb rejects, say):
   * each half is tried under its own savepoint, down to the single entries that fail, which are parked
   * with their error. One bad event in a page of n costs about 2·log2(n) attempts, not n.
   */
  private async applyBisecting(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    schema: string,
    from: LogCheckpoint,
    keys: LogCheckpoint[],
    depth: number,
  ): Promise<number> {
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
            [part[0].position, errorText(error)],
          );
          parked++;
        }
      }
      start = part[part.length - 1];
    }
    return parked;
  }

  /**
   * One statement (rangeSql) applies the range, parking the entries whose subject is missing. A
   * projection with `winners` first tries the cheaper statement that parses only the winning events' payloads.
   */
  private async applyRange(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    schema: string,
    from: LogCheckpoint,
    to: LogCheckpoint,
    entries: number,
  ): Promise<number> {
    const smallPage = entries <= SMALL_PAGE_ENTRIES;
    const live = schema === projection.schema;
    const params = [from.transactionId, from.position, to.transactionId, to.position];
    // Only the live projection publishes: a rebuild's shadow publishes at its swap, and only what differs.
    const published = live ? new Set(this.publishedTypes(projection)) : new Set<string>();
    const run = async (sql: string, values: string[]) => {
      const [row] = await (smallPage && live
        ? preparedOn<Record<string, number>>(runner, sql, values)
        : runner.query(withLiterals(sql, values)));
      return row;
    };
    if (projection.winners !== undefined) {
      const fast = await run(winnersSql(projection, schema, published, smallPage), params);
      // A winner without its subject would have to give way to the next newest: the full statement sorts that out.
      if (fast.missing === 0) return 0;
    }
    const row = await run(rangeSql(projection, schema, published, smallPage), [...params, projection.missingError]);
    return row.parked;
  }

  /**
   * Applies each parked entry of the live projection again (reconcile does this): one that now
   * applies leaves the parked list; one that fails again stays, with its new error. Returns how
   * many were released. Each entry has its own short transaction: the live projection's lock and
   * the transaction id (which holds event_log_horizon() back for every reader) are held for one
   * entry at a time, never across the whole list.
   */
  async retryParked(
    runner: QueryRunner,
    projection: ProjectionDefinition,
  ): Promise<{ retried: number; released: number }> {
    const parked: Array<{ transaction_id: string; position: string }> = await runner.query(
      `SELECT e.transaction_id::text AS transaction_id, e.position::text AS position
         FROM ${projection.schema}.parked_events p JOIN event_log e ON e.position = p.position
        ORDER BY e.transaction_id, e.position`,
    );
    let released = 0;
    for (const entry of parked) {
      if (await this.retryOne(runner, projection, entry)) released++;
    }
    return { retried: parked.length, released };
  }

  /** One parked entry, in its own transaction: true when it applied. A data error rolls back and records the new error. */
  private async retryOne(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    entry: { transaction_id: string; position: string },
  ): Promise<boolean> {
    const at: LogCheckpoint = { transactionId: entry.transaction_id, position: entry.position };
    const before: LogCheckpoint = {
      transactionId: entry.transaction_id,
      position: String(BigInt(entry.position) - 1n),
    };
    await runner.startTransaction();
    try {
      await this.lockLive(runner, projection);
      // Gone meanwhile (a rebuild swapped the schema in, say): nothing to retry.
      const deleted = await runner.query(
        `DELETE FROM ${projection.schema}.parked_events WHERE position = $1`,
        [entry.position],
        true,
      );
      const parkedAgain =
        deleted.affected === 0 ? 1 : await this.applyRange(runner, projection, projection.schema, before, at, 1);
      await runner.commitTransaction();
      return parkedAgain === 0;
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      if (!isDataError(error)) throw error;
      await runner.query(
        `UPDATE ${projection.schema}.parked_events SET error = $2, parked_at = now() WHERE position = $1`,
        [entry.position, errorText(error)],
      );
      return false;
    }
  }
}

function errorText(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 1000);
}

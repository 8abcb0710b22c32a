import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import type { LogCheckpoint } from '../event-log/log-entry.js';
import type { ProjectionDefinition } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';

const PAGE_SIZE = 50000;
/** First key of the session lock that lets one rebuild (replay or verify) of a projection run at a time. */
const REBUILD_LOCK_SPACE = 7_260_200;
const COMPARED = ['owner_id', 'attributes', 'relationships', 'deleted', 'occurred_at', 'event_seq', 'event_id', 'position',
  'data_occurred_at', 'data_event_seq', 'data_event_id'];
const MAX_REPORTED = 1000;

export interface RebuildProgress {
  projection: string;
  phase: 'rebuilding' | 'swapping' | 'comparing';
  applied: number;
  total: number;
}

export interface ReplayReport {
  projection: string;
  applied: number;
  parked: number;
  seconds: number;
}

export interface Difference {
  type: string;
  id: string;
  /** The fields that differ, or `missing` (in the rebuild, not live) / `unexpected` (live, not in the rebuild). */
  fields: string[];
}

export interface VerifyReport {
  projection: string;
  differences: Difference[];
  /** All differences found; `differences` lists the first 1000. */
  count: number;
}

export class RebuildInProgressError extends Error {}

/**
 * Rebuilds a projection from the whole log into a shadow copy of its schema, while the daemon keeps
 * projecting and serving from the live one. `replay` swaps the shadow in; `verify` compares.
 */
@Injectable()
export class RebuildService {
  private readonly logger = new Logger(RebuildService.name);

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly projections: ProjectionRepository,
  ) {}

  /**
   * Blue/green: the shadow is filled page by page, then — holding the projection's transaction lock,
   * so no live page runs meanwhile — caught up to a fixed horizon and renamed into place with its
   * checkpoint in one transaction. The live projector then continues from the shadow's checkpoint:
   * nothing is applied twice and nothing between the rebuild's end and the swap is lost. Interrupted
   * at any point, the live schema is untouched; a rerun drops the leftover shadow and starts over.
   */
  async replay(projection: ProjectionDefinition, onProgress: (progress: RebuildProgress) => void = () => undefined): Promise<ReplayReport> {
    const started = Date.now();
    return this.withRebuild(projection, 'shadow', async (runner, shadow) => {
      const applied = await this.fill(runner, projection, shadow, undefined, onProgress);
      onProgress({ projection: projection.name, phase: 'swapping', applied, total: applied });
      await runner.startTransaction();
      try {
        await this.projections.lockLive(runner, projection);
        const horizon = await this.horizon(runner);
        let tail = 0;
        for (;;) {
          const page = await this.projections.applyPageInTransaction(runner, projection, PAGE_SIZE, shadow, horizon);
          tail += page.entries;
          if (page.entries === 0) break;
        }
        // Left by an earlier replay cut off between its swap and its clean-up.
        await runner.query(`DROP SCHEMA IF EXISTS ${projection.schema}__old CASCADE`);
        await runner.query(`ALTER SCHEMA ${projection.schema} RENAME TO ${projection.schema}__old`);
        await runner.query(`ALTER SCHEMA ${shadow} RENAME TO ${projection.schema}`);
        await runner.commitTransaction();
        await runner.query(`DROP SCHEMA ${projection.schema}__old CASCADE`);
        const status = await this.projections.status(projection);
        this.logger.log(`replayed ${projection.name}: ${applied + tail} entries, ${status.parked} parked`);
        return { projection: projection.name, applied: applied + tail, parked: status.parked, seconds: (Date.now() - started) / 1000 };
      } catch (error) {
        if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
        throw error;
      }
    });
  }

  /**
   * Rebuilds into a scratch schema up to the live checkpoint and compares it with the live model,
   * holding the projection's transaction lock while it catches up to that checkpoint and compares.
   */
  async verify(projection: ProjectionDefinition, onProgress: (progress: RebuildProgress) => void = () => undefined): Promise<VerifyReport> {
    return this.withRebuild(projection, 'verify', async (runner, scratch) => {
      const target = await this.projections.checkpoint(runner, projection);
      await this.fill(runner, projection, scratch, target, onProgress);
      await runner.startTransaction();
      try {
        await this.projections.lockLive(runner, projection);
        const live = await this.projections.checkpoint(runner, projection);
        while ((await this.projections.applyPageInTransaction(runner, projection, PAGE_SIZE, scratch, live)).entries > 0);
        onProgress({ projection: projection.name, phase: 'comparing', applied: 0, total: 0 });
        const report = await this.compare(runner, projection, scratch);
        await runner.rollbackTransaction();
        return report;
      } catch (error) {
        if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
        throw error;
      }
    });
  }

  private async withRebuild<T>(projection: ProjectionDefinition, suffix: string,
    work: (runner: QueryRunner, schema: string) => Promise<T>): Promise<T> {
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    const schema = `${projection.schema}__${suffix}`;
    try {
      const [{ locked }] = await runner.query('SELECT pg_try_advisory_lock($1, $2) AS locked', [REBUILD_LOCK_SPACE, projection.lockKey]);
      if (!locked) throw new RebuildInProgressError(`another replay or verify of ${projection.name} is running`);
      await this.projections.prepare(runner);
      await this.createShadow(runner, projection, schema);
      try {
        return await work(runner, schema);
      } finally {
        await runner.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
      }
    } finally {
      await runner.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
      await runner.release();
    }
  }

  /** An empty copy of the live schema (columns, generated columns, constraints, indexes). */
  private async createShadow(runner: QueryRunner, projection: ProjectionDefinition, schema: string): Promise<void> {
    await runner.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await runner.query(`CREATE SCHEMA ${schema}`);
    for (const table of ['checkpoint', 'parked_events', ...projection.tables.map((t) => t.table)]) {
      // LIKE copies columns, constraints and indexes but not storage options (fillfactor).
      const [{ options }] = await runner.query(
        `SELECT array_to_string(reloptions, ', ') AS options FROM pg_class WHERE oid = $1::regclass`, [`${projection.schema}.${table}`]);
      await runner.query(`CREATE TABLE ${schema}.${table} (LIKE ${projection.schema}.${table} INCLUDING ALL)`
        + (options ? ` WITH (${options})` : ''));
    }
    await runner.query(`INSERT INTO ${schema}.checkpoint DEFAULT VALUES`);
  }

  private async fill(runner: QueryRunner, projection: ProjectionDefinition, schema: string, until: LogCheckpoint | undefined,
    onProgress: (progress: RebuildProgress) => void): Promise<number> {
    const [{ total }] = await runner.query(`SELECT count(*)::int AS total FROM event_log`);
    let applied = 0;
    for (;;) {
      const page = await this.projections.applyPage(runner, projection, PAGE_SIZE, schema, until);
      applied += page.entries;
      onProgress({ projection: projection.name, phase: 'rebuilding', applied, total: Math.max(total, applied) });
      // Under steady ingestion a page is never empty: near the head is enough, the rest follows under the lock.
      if (page.entries < PAGE_SIZE) return applied;
    }
  }

  /** The last entry a gap-safe reader may read now. */
  private async horizon(runner: QueryRunner): Promise<LogCheckpoint> {
    const rows: Array<{ transaction_id: string; position: string }> = await runner.query(
      `SELECT e.transaction_id::text AS transaction_id, e.position::text AS position FROM event_log e
        WHERE e.transaction_id < (SELECT event_log_horizon())
        ORDER BY e.transaction_id DESC, e.position DESC LIMIT 1`);
    return rows.length === 0 ? { transactionId: '0', position: '0' } : { transactionId: rows[0].transaction_id, position: rows[0].position };
  }

  private async compare(runner: QueryRunner, projection: ProjectionDefinition, scratch: string): Promise<VerifyReport> {
    const differences: Difference[] = [];
    let count = 0;
    for (const { type, table } of projection.tables) {
      const rows: Array<{ id: string; live: boolean; rebuilt: boolean; fields: string[] }> = await runner.query(
        `SELECT coalesce(l.id, s.id) AS id, l.id IS NOT NULL AS live, s.id IS NOT NULL AS rebuilt,
                array_remove(ARRAY[${COMPARED.map((c) => `CASE WHEN l.${c} IS DISTINCT FROM s.${c} THEN '${c}' END`).join(', ')}], NULL) AS fields
           FROM ${projection.schema}.${table} l FULL JOIN ${scratch}.${table} s ON s.id = l.id
          WHERE l.id IS NULL OR s.id IS NULL
             OR (${COMPARED.map((c) => `l.${c}`).join(', ')}) IS DISTINCT FROM (${COMPARED.map((c) => `s.${c}`).join(', ')})
          ORDER BY coalesce(l.sort_key, s.sort_key)`);
      count += rows.length;
      for (const row of rows) {
        if (differences.length >= MAX_REPORTED) break;
        differences.push({ type, id: row.id, fields: !row.live ? ['missing'] : !row.rebuilt ? ['unexpected'] : row.fields });
      }
    }
    return { projection: projection.name, differences, count };
  }
}

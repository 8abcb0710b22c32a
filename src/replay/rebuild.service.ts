import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { openSession } from '../database/database-sessions.js';
import type { LogCheckpoint } from '../event-log/log-entry.js';
import type { ProjectionDefinition } from '../projection/projection-definitions.js';
import { PAGE_ENTRIES, ProjectionRepository } from '../projection/projection.repository.js';
import { ProjectionStatusRepository } from '../projection/projection-status.repository.js';
import { CheckpointRepository, SavedCheckpoint } from './checkpoint.repository.js';
import { ShadowSchemaRepository } from './shadow-schema.repository.js';

const MAX_REPORTED = 1000;

export interface RebuildProgress {
  projection: string;
  phase: 'rebuilding' | 'swapping' | 'comparing';
  applied: number;
  total: number;
}

export interface ReplayReport {
  projection: string;
  /** The checkpoint the rebuild started from, or null: the log's first entry. */
  from: SavedCheckpoint | null;
  /** Log entries applied after where it started. */
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

/** What a rebuild's session reads as the log, set up before the rebuild and undone after (the archive's whole history). */
export interface LogSource {
  prepare(runner: QueryRunner): Promise<void>;
  release(runner: QueryRunner): Promise<void>;
}

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
    private readonly statuses: ProjectionStatusRepository,
    private readonly shadows: ShadowSchemaRepository,
    private readonly checkpoints: CheckpointRepository = new CheckpointRepository(),
  ) {}

  /**
   * Blue/green: the shadow is filled page by page, then — holding the projection's transaction lock,
   * so no live page runs meanwhile — caught up to a fixed horizon and renamed into place with its
   * checkpoint in one transaction. The live projector then continues from the shadow's checkpoint:
   * nothing is applied twice and nothing between the rebuild's end and the swap is lost. The same
   * transaction publishes a change for exactly each resource the swap changes (as the API shows it). Interrupted
   * at any point, the live schema is untouched; a rerun drops the leftover shadow and starts over.
   * From `from`, a saved checkpoint, the shadow starts as that checkpoint and applies only the log after it.
   */
  async replay(
    projection: ProjectionDefinition,
    onProgress: (progress: RebuildProgress) => void = () => undefined,
    from: SavedCheckpoint | null = null,
    log?: LogSource,
  ): Promise<ReplayReport> {
    const started = Date.now();
    return this.withRebuild(projection, 'shadow', from, log, async (runner, shadow) => {
      const applied = await this.fill(runner, projection, shadow, undefined, onProgress);
      onProgress({ projection: projection.name, phase: 'swapping', applied, total: applied });
      await runner.startTransaction();
      try {
        await this.projections.lockLive(runner, projection);
        const horizon = await this.shadows.horizon(runner);
        let tail = 0;
        for (;;) {
          const page = await this.projections.applyPageInTransaction(runner, projection, PAGE_ENTRIES, shadow, horizon);
          tail += page.entries;
          if (page.entries === 0) break;
        }
        const published = await this.shadows.publishDifferences(
          runner,
          projection,
          shadow,
          this.projections.publishedTypes(projection),
        );
        await this.shadows.carryOwnerVersions(runner, projection, shadow);
        await this.shadows.swap(runner, projection, shadow);
        await runner.commitTransaction();
        await this.shadows.dropRetired(runner, projection);
        const status = await this.statuses.status(projection);
        this.logger.log(
          `replayed ${projection.name}: ${applied + tail} entries, ${status.parked} parked, ${published} change(s) published`,
        );
        return {
          projection: projection.name,
          from,
          applied: applied + tail,
          parked: status.parked,
          seconds: (Date.now() - started) / 1000,
        };
      } catch (error) {
        if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
        throw error;
      }
    });
  }

  /**
   * Rebuilds into a scratch schema up to the live checkpoint and compares it with the live model,
   * holding the projection's transaction lock while it catches up to that checkpoint and compares.
   * From `from`, a saved checkpoint, the scratch schema starts as that checkpoint.
   */
  async verify(
    projection: ProjectionDefinition,
    onProgress: (progress: RebuildProgress) => void = () => undefined,
    from: SavedCheckpoint | null = null,
    log?: LogSource,
  ): Promise<VerifyReport> {
    return this.withRebuild(projection, 'verify', from, log, async (runner, scratch) => {
      const target = await this.projections.checkpoint(runner, projection);
      await this.fill(runner, projection, scratch, target, onProgress);
      await runner.startTransaction();
      try {
        await this.projections.lockLive(runner, projection);
        const live = await this.projections.checkpoint(runner, projection);
        while (
          (await this.projections.applyPageInTransaction(runner, projection, PAGE_ENTRIES, scratch, live)).entries > 0
        );
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

  /** The newest saved checkpoint of `projection` (`menu-sync checkpoint`), or null. */
  async newestCheckpoint(projection: ProjectionDefinition): Promise<SavedCheckpoint | null> {
    return this.checkpoints.newest(this.dataSource, projection);
  }

  private async withRebuild<T>(
    projection: ProjectionDefinition,
    suffix: string,
    from: SavedCheckpoint | null,
    log: LogSource | undefined,
    work: (runner: QueryRunner, schema: string) => Promise<T>,
  ): Promise<T> {
    const runner = await openSession(this.dataSource);
    const schema = `${projection.schema}__${suffix}`;
    try {
      if (!(await this.shadows.tryLock(runner, projection)))
        throw new RebuildInProgressError(`another replay or verify of ${projection.name} is running`);
      await log?.prepare(runner);
      await this.projections.prepare(runner);
      await this.shadows.create(runner, projection, schema);
      if (from !== null) await this.checkpoints.restoreInto(runner, projection, from, schema);
      try {
        return await work(runner, schema);
      } finally {
        await this.shadows.drop(runner, schema).catch(() => undefined);
      }
    } finally {
      await log?.release(runner).catch(() => undefined);
      await this.shadows.unlock(runner).catch(() => undefined);
      await runner.release();
    }
  }

  private async fill(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    schema: string,
    until: LogCheckpoint | undefined,
    onProgress: (progress: RebuildProgress) => void,
  ): Promise<number> {
    const total = await this.shadows.countLogEntries(runner);
    let applied = 0;
    for (;;) {
      const page = await this.projections.applyPage(runner, projection, PAGE_ENTRIES, schema, until);
      applied += page.entries;
      onProgress({ projection: projection.name, phase: 'rebuilding', applied, total: Math.max(total, applied) });
      // Under steady ingestion a page is never empty: near the head is enough, the rest follows under the lock.
      if (page.entries < PAGE_ENTRIES) return applied;
    }
  }

  private async compare(runner: QueryRunner, projection: ProjectionDefinition, scratch: string): Promise<VerifyReport> {
    const differences: Difference[] = [];
    let count = 0;
    for (const { type, table } of projection.tables) {
      const rows = await this.shadows.differences(runner, projection, table, scratch);
      count += rows.length;
      for (const row of rows) {
        if (differences.length >= MAX_REPORTED) break;
        differences.push({
          type,
          id: row.id,
          fields: !row.live ? ['missing'] : !row.rebuilt ? ['unexpected'] : row.fields,
        });
      }
    }
    return { projection: projection.name, differences, count };
  }
}

import type { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { AuditLog } from '../audit/audit-log.service.js';
import { AuditRepository } from '../audit/audit.repository.js';
import { AppConfig } from '../config/app-config.js';
import { PROJECTIONS, projectionByName, ProjectionDefinition } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { ProjectionStatusRepository } from '../projection/projection-status.repository.js';
import { RebuildProgress, RebuildService } from '../replay/rebuild.service.js';
import { ShadowSchemaRepository } from '../replay/shadow-schema.repository.js';
import { withDaemonDataSource } from './daemon-database.js';
import { PROJECTION_NAMES } from './option-parsers.js';
import { progressReporter } from './progress.js';

/** `--projection NAME|all` → the projections, or undefined for an unknown name. */
export function selectProjections(name: string | undefined): ProjectionDefinition[] | undefined {
  if (name === undefined || name === 'all') return [...PROJECTIONS];
  const projection = projectionByName(name);
  return projection === undefined ? undefined : [projection];
}

/**
 * Runs `work` with a RebuildService on the daemon's database (attaching to a running embedded one),
 * with a session for each of `rebuilds` rebuilds at a time and one for their status reads.
 */
export function withRebuildService<T>(
  config: AppConfig,
  rebuilds: number,
  work: (rebuild: RebuildService, audit: AuditLog, dataSource: DataSource) => Promise<T>,
): Promise<T> {
  return withDaemonDataSource(config, rebuilds + 1, (dataSource) =>
    work(
      new RebuildService(
        dataSource,
        new ProjectionRepository(config.changeTypes),
        new ProjectionStatusRepository(dataSource),
        new ShadowSchemaRepository(),
      ),
      new AuditLog(new AuditRepository(dataSource), config),
      dataSource,
    ),
  );
}

/**
 * The frame of `replay` and `verify`: `--projection` checked (exit 2 when unknown), then `work` run
 * for the selected projections at the same time, each on a session of its own, with one progress
 * reporter; what each returns is printed once the progress bars are gone, and the first failure,
 * if any, is thrown after that.
 */
export async function forEachProjection(
  command: string,
  config: AppConfig,
  logger: Logger,
  name: string | undefined,
  work: (
    rebuild: RebuildService,
    projection: ProjectionDefinition,
    progress: (update: RebuildProgress) => void,
    audit: AuditLog,
    dataSource: DataSource,
  ) => Promise<string>,
): Promise<void> {
  const projections = selectProjections(name);
  if (projections === undefined) {
    process.stderr.write(`menu-sync ${command}: --projection must be ${PROJECTION_NAMES}\n`);
    process.exitCode = 2;
    return;
  }
  await withRebuildService(config, projections.length, async (rebuild, audit, dataSource) => {
    const progress = progressReporter(logger);
    const ended = await Promise.allSettled(
      projections.map((projection) => work(rebuild, projection, progress.update, audit, dataSource)),
    ).finally(() => progress.stop());
    for (const end of ended) if (end.status === 'fulfilled') process.stdout.write(end.value);
    const failure = ended.find((end): end is PromiseRejectedResult => end.status === 'rejected');
    if (failure !== undefined) throw failure.reason;
  });
}

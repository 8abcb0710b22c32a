import type { Logger } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { PROJECTIONS, projectionByName, ProjectionDefinition } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { ProjectionStatusRepository } from '../projection/projection-status.repository.js';
import { RebuildProgress, RebuildService } from '../replay/rebuild.service.js';
import { ShadowSchemaRepository } from '../replay/shadow-schema.repository.js';
import { withDaemonDataSource } from './daemon-database.js';
import { progressReporter } from './progress.js';

/** `--projection NAME|all` → the projections, or undefined for an unknown name. */
export function selectProjections(name: string | undefined): ProjectionDefinition[] | undefined {
  if (name === undefined || name === 'all') return [...PROJECTIONS];
  const projection = projectionByName(name);
  return projection === undefined ? undefined : [projection];
}

export const PROJECTION_NAMES = ['all', ...PROJECTIONS.map((projection) => projection.name)].join('|');

/** Runs `work` with a RebuildService on the daemon's database (attaching to a running embedded one). */
export function withRebuildService<T>(config: AppConfig, work: (rebuild: RebuildService) => Promise<T>): Promise<T> {
  return withDaemonDataSource(config, 3, (dataSource) =>
    work(
      new RebuildService(
        dataSource,
        new ProjectionRepository(config.changeTypes),
        new ProjectionStatusRepository(dataSource),
        new ShadowSchemaRepository(),
      ),
    ),
  );
}

/**
 * The frame of `replay` and `verify`: `--projection` checked (exit 2 when unknown), then `work` run
 * for each selected projection with a progress reporter; what it returns is printed once the
 * progress bar is gone.
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
  ) => Promise<string>,
): Promise<void> {
  const projections = selectProjections(name);
  if (projections === undefined) {
    process.stderr.write(`menu-sync ${command}: --projection must be ${PROJECTION_NAMES}\n`);
    process.exitCode = 2;
    return;
  }
  await withRebuildService(config, async (rebuild) => {
    for (const projection of projections) {
      const progress = progressReporter(logger);
      let text: string;
      try {
        text = await work(rebuild, projection, progress.update);
      } finally {
        progress.stop();
      }
      process.stdout.write(text);
    }
  });
}

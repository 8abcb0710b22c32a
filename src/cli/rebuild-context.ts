import { AppConfig } from '../config/app-config.js';
import { createDataSource } from '../database/data-source.factory.js';
import { openDatabase } from '../database/database-target.js';
import { migrateDatabase } from '../database/migrate.js';
import { PROJECTIONS, projectionByName, ProjectionDefinition } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { RebuildService } from '../replay/rebuild.service.js';

/** `--projection NAME|all` → the projections, or undefined for an unknown name. */
export function selectProjections(name: string | undefined): ProjectionDefinition[] | undefined {
  if (name === undefined || name === 'all') return [...PROJECTIONS];
  const projection = projectionByName(name);
  return projection === undefined ? undefined : [projection];
}

export const PROJECTION_NAMES = ['all', ...PROJECTIONS.map((projection) => projection.name)].join('|');

/** Runs `work` with a RebuildService on the daemon's database (attaching to a running embedded one). */
export async function withRebuildService<T>(config: AppConfig, work: (rebuild: RebuildService) => Promise<T>): Promise<T> {
  const database = await openDatabase(config, { attach: true });
  try {
    if (config.MIGRATIONS_RUN) await migrateDatabase(database.url);
    const dataSource = createDataSource({ url: database.url, poolSize: 3 });
    await dataSource.initialize();
    try {
      return await work(new RebuildService(dataSource, new ProjectionRepository(dataSource)));
    } finally {
      await dataSource.destroy();
    }
  } finally {
    await database.close();
  }
}

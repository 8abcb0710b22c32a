import { createDataSource } from './data-source.factory.js';
import { runMigrations } from './migration.runner.js';

/** Applies pending migrations with a short-lived connection; returns the names applied. */
export async function migrateDatabase(url: string, poolSize = 2): Promise<string[]> {
  const dataSource = createDataSource({ url, poolSize: Math.min(poolSize, 2) });
  await dataSource.initialize();
  try {
    return await runMigrations(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

import { createDataSource } from './data-source.factory.js';
import { tlsRefusal } from './database-tls.js';
import { runMigrations } from './migration.runner.js';

/** Applies pending migrations with a short-lived connection; returns the names applied. */
export async function migrateDatabase(url: string, poolSize = 2): Promise<string[]> {
  const dataSource = createDataSource({ url, poolSize: Math.min(poolSize, 2) });
  await dataSource.initialize().catch((error: unknown) => {
    throw tlsRefusal(error, url) ?? error;
  });
  try {
    return await runMigrations(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

/**
 * Opens one session on `url` and closes it, so that a certificate refused stops the start with
 * one clear line; any other failure is left to the data source's own retries.
 */
export async function checkDatabaseTls(url: string): Promise<void> {
  const dataSource = createDataSource({ url, poolSize: 1 });
  try {
    await dataSource.initialize();
  } catch (error) {
    const refusal = tlsRefusal(error, url);
    if (refusal !== null) throw refusal;
    return;
  }
  await dataSource.destroy();
}

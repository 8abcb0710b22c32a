import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { advisoryLocks, lockQuery } from './advisory-locks.js';

const MIGRATION_LOCK = advisoryLocks.single('migrations');

/** Applies pending migrations under an advisory lock; returns the names applied. */
export async function runMigrations(dataSource: DataSource): Promise<string[]> {
  const logger = new Logger('Migrations');
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query(...lockQuery('pg_advisory_lock', MIGRATION_LOCK));
    const applied = await dataSource.runMigrations({ transaction: 'each' });
    for (const migration of applied) logger.log(`applied ${migration.name}`);
    return applied.map((migration) => migration.name);
  } finally {
    await runner.query(...lockQuery('pg_advisory_unlock', MIGRATION_LOCK)).catch(() => undefined);
    await runner.release();
  }
}

export async function hasPendingMigrations(dataSource: DataSource): Promise<boolean> {
  return dataSource.showMigrations();
}

import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';

/** Any constant; two daemons starting together on one database migrate one after the other. */
const MIGRATION_LOCK = 7_260_001;

/** Applies pending migrations under an advisory lock; returns the names applied. */
export async function runMigrations(dataSource: DataSource): Promise<string[]> {
  const logger = new Logger('Migrations');
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    const applied = await dataSource.runMigrations({ transaction: 'each' });
    for (const migration of applied) logger.log(`applied ${migration.name}`);
    return applied.map((migration) => migration.name);
  } finally {
    await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    await runner.release();
  }
}

export async function hasPendingMigrations(dataSource: DataSource): Promise<boolean> {
  return dataSource.showMigrations();
}

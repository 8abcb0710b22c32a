import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { advisoryLocks, lockQuery } from './advisory-locks.js';
import { boundLockWaits, isLockTimeout, MIGRATION_LOCK_TIMEOUT_MS } from './migration-lock-waits.js';

const MIGRATION_LOCK = advisoryLocks.single('migrations');
/** A migration that cannot take its locks is tried again this often, this many times, before the run fails. */
const LOCK_RETRY_PAUSE_MS = 2000;
const LOCK_ATTEMPTS = 30;

/** Applies pending migrations under an advisory lock; returns the names applied. */
export async function runMigrations(dataSource: DataSource): Promise<string[]> {
  const logger = new Logger('Migrations');
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query(...lockQuery('pg_advisory_lock', MIGRATION_LOCK));
    const names: string[] = [];
    for (let attempt = 1; ; attempt++) {
      const called = boundLockWaits(dataSource);
      called.length = 0;
      try {
        const applied = await dataSource.runMigrations({ transaction: 'each' });
        names.push(...applied.map((migration) => migration.name));
        break;
      } catch (error) {
        if (!isLockTimeout(error) || attempt >= LOCK_ATTEMPTS) throw error;
        names.push(...called.slice(0, -1));
        logger.warn(
          `migration ${called.at(-1)} waited ${MIGRATION_LOCK_TIMEOUT_MS} ms for a lock (writes queue behind it): trying again in ${LOCK_RETRY_PAUSE_MS / 1000} s (attempt ${attempt} of ${LOCK_ATTEMPTS})`,
        );
        await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_PAUSE_MS));
      }
    }
    for (const name of names) logger.log(`applied ${name}`);
    return names;
  } finally {
    await runner.query(...lockQuery('pg_advisory_unlock', MIGRATION_LOCK)).catch(() => undefined);
    await runner.release();
  }
}

export async function hasPendingMigrations(dataSource: DataSource): Promise<boolean> {
  return dataSource.showMigrations();
}

import type { DataSource, MigrationInterface, QueryRunner } from 'typeorm';

/**
 * How long a statement of a migration run in a transaction may wait for a lock. While an
 * `ALTER TABLE` waits (behind a long read, say), every INSERT into that table queues behind it,
 * so the wait is bounded well below a second and the migration is tried again later instead.
 */
export const MIGRATION_LOCK_TIMEOUT_MS = 500;
const LOCK_NOT_AVAILABLE = '55P03';
const calls = new WeakMap<DataSource, string[]>();

/**
 * Starts each of the data source's migrations that run in a transaction with `SET LOCAL
 * lock_timeout`; a migration with `transaction = false` (a CONCURRENTLY build, which waits for
 * older transactions without blocking writes) sets its own where it needs one. Returns the names
 * of the migrations whose `up` was called, in order, so that a run cut off by a lock timeout
 * knows which ones were committed before it.
 */
export function boundLockWaits(dataSource: DataSource): string[] {
  const known = calls.get(dataSource);
  if (known !== undefined) return known;
  const called: string[] = [];
  calls.set(dataSource, called);
  for (const migration of dataSource.migrations as MigrationInterface[]) {
    const up = migration.up.bind(migration);
    const name = migration.name ?? migration.constructor.name;
    migration.up = async (runner: QueryRunner) => {
      called.push(name);
      if (migration.transaction !== false) {
        await runner.query(`SET LOCAL lock_timeout = '${MIGRATION_LOCK_TIMEOUT_MS}ms'`);
      }
      await up(runner);
    };
  }
  return called;
}

export function isLockTimeout(error: unknown): boolean {
  const driver = (error as { driverError?: unknown })?.driverError ?? error;
  return (driver as { code?: unknown })?.code === LOCK_NOT_AVAILABLE;
}

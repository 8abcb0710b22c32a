import pg from 'pg';
import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource } from '../../test/support/database.js';
import type { TestDatabase } from '../../test/support/database.js';
import { SINGLE_LOCKS } from '../database/advisory-locks.js';
import { ReconcileRepository } from './reconcile.repository.js';

/** ReconcileRepository.exclusively: one run at a time, and a bounded wait for the run in progress. */
describe('ReconcileRepository.exclusively (PostgreSQL)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let repository: ReconcileRepository;
  /** Another session: a run in progress elsewhere. */
  let other: pg.Client;
  const tryLock = async (): Promise<boolean> =>
    (await other.query('SELECT pg_try_advisory_lock($1::bigint) AS locked', [SINGLE_LOCKS.reconcile])).rows[0].locked;
  const unlock = () => other.query('SELECT pg_advisory_unlock($1::bigint)', [SINGLE_LOCKS.reconcile]);

  beforeAll(async () => {
    database = await createTestDatabase();
    // One connection: what the wait sets on it must be gone when it is used next.
    dataSource = await openDataSource(database.url, 1);
    repository = new ReconcileRepository(dataSource);
    other = new pg.Client({ connectionString: database.url });
    await other.connect();
  });

  afterAll(async () => {
    await other?.end();
    await dataSource?.destroy();
    await database?.drop();
  });

  it('runs the work at once when no run is in progress, holding the lock until it ends', async () => {
    const seen: Array<[number, boolean]> = [];
    expect(await repository.exclusively(async (waitedMs) => seen.push([waitedMs, await tryLock()]), 5000)).toBe(1);
    expect(seen).toEqual([[0, false]]);
    expect(await tryLock()).toBe(true);
    await unlock();
  });

  it('does not wait by default: undefined at once while another run holds the lock', async () => {
    expect(await tryLock()).toBe(true);
    try {
      const started = Date.now();
      let ran = false;
      expect(await repository.exclusively(async () => (ran = true))).toBeUndefined();
      expect(ran).toBe(false);
      expect(Date.now() - started).toBeLessThan(1000);
    } finally {
      await unlock();
    }
  });

  it('waits up to waitMs, then gives up; the connection keeps no lock timeout', async () => {
    expect(await tryLock()).toBe(true);
    try {
      const started = Date.now();
      let ran = false;
      expect(await repository.exclusively(async () => (ran = true), 400)).toBeUndefined();
      expect(ran).toBe(false);
      expect(Date.now() - started).toBeGreaterThanOrEqual(400);
      expect(await dataSource.query('SHOW lock_timeout')).toEqual([{ lock_timeout: '0' }]);
    } finally {
      await unlock();
    }
  });

  it('runs the work as soon as the run in progress ends, saying how long it waited', async () => {
    expect(await tryLock()).toBe(true);
    const released = new Promise<void>((resolve) => setTimeout(() => void unlock().then(() => resolve()), 300));
    const seen: Array<[number, boolean]> = [];
    expect(await repository.exclusively(async (waitedMs) => seen.push([waitedMs, await tryLock()]), 10_000)).toBe(1);
    await released;
    expect(seen).toEqual([[expect.any(Number), false]]);
    expect(seen[0][0]).toBeGreaterThanOrEqual(250);
    expect(seen[0][0]).toBeLessThan(5000);
    expect(await tryLock()).toBe(true);
    await unlock();
  });
});

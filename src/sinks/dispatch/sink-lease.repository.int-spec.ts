import type { DataSource, QueryRunner } from 'typeorm';
import { createTestDatabase, openDataSource, TestDatabase } from '../../../test/support/database.js';
import { AdvisoryLease } from '../../database/advisory-lease.js';
import { advisoryLocks, lockQuery } from '../../database/advisory-locks.js';
import { SINK_DISPATCHER_LOCK, SinkLeaseRepository } from './sink-lease.repository.js';

describe('SinkLeaseRepository (PostgreSQL): dispatchers and sink leases as pg_locks shows them', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  const repository = new SinkLeaseRepository();
  const leases: AdvisoryLease[] = [];

  /** A dispatcher's connection: the shared dispatcher lock held, its session prepared. */
  async function dispatcher(): Promise<QueryRunner> {
    const lease = new AdvisoryLease(dataSource, SINK_DISPATCHER_LOCK, (runner) => repository.prepare(runner), 'shared');
    leases.push(lease);
    expect(await lease.tryAcquire()).toBe(true);
    return lease.runner!;
  }

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource(database.url, 6);
  });

  afterAll(async () => {
    for (const lease of leases) await lease.release();
    await dataSource?.destroy();
    await database?.drop();
  });

  it('counts the dispatchers, tells who holds each bucket, and a bucket is held by one session at a time', async () => {
    const first = await dispatcher();
    const second = await dispatcher();
    const [firstPid, secondPid] = await Promise.all(
      [first, second].map(async (runner) => (await runner.query('SELECT pg_backend_pid() AS pid'))[0].pid as number),
    );
    expect(await repository.tryTake(first, 1023)).toBe(true);
    expect(await repository.tryTake(first, 42)).toBe(true);
    expect(await repository.tryTake(second, 42)).toBe(false);
    expect(await repository.tryTake(second, 7)).toBe(true);

    const view = await repository.view(second);
    expect({ ...view, holders: [...view.holders].sort((a, b) => a[0] - b[0]) }).toEqual({
      self: secondPid,
      dispatchers: 2,
      holders: [
        [7, secondPid],
        [42, firstPid],
        [1023, firstPid],
      ],
      olderDispatchers: 0,
    });
    const settings = await first.query(`SELECT current_setting('tcp_keepalives_count') AS count`);
    expect(settings[0].count).toBe('2');

    await repository.release(first, 42);
    expect(await repository.tryTake(second, 42)).toBe(true);
    expect((await repository.view(first)).holders.get(42)).toBe(secondPid);

    // A dispatcher of a version before buckets holds a lease per sink (a hash of its id, negative too).
    const older = dataSource.createQueryRunner();
    await older.connect();
    await older.query(...lockQuery('pg_advisory_lock', advisoryLocks.inSpace('sinkLease', -1_234_567_890)));
    expect((await repository.view(first)).olderDispatchers).toBe(1);
    await older.query(...lockQuery('pg_advisory_unlock', advisoryLocks.inSpace('sinkLease', -1_234_567_890)));
    await older.release();
    expect((await repository.view(first)).olderDispatchers).toBe(0);
  });

  it('a daemon of before shared leases, holding the dispatcher lock alone, keeps the new dispatchers out, and the other way round', async () => {
    const exclusive = new AdvisoryLease(dataSource, advisoryLocks.single('sinkDispatcher'));
    leases.push(exclusive);
    // The two dispatchers of the test before still hold it shared.
    expect(await exclusive.tryAcquire()).toBe(false);
    for (const lease of leases.slice(0, 2)) await lease.release();
    expect(await exclusive.tryAcquire()).toBe(true);
    const shared = new AdvisoryLease(dataSource, SINK_DISPATCHER_LOCK, undefined, 'shared');
    leases.push(shared);
    expect(await shared.tryAcquire()).toBe(false);
  });
});

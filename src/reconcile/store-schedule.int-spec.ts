import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource } from '../../test/support/database.js';
import type { TestDatabase } from '../../test/support/database.js';
import { SecretCipher } from '../common/secret-cipher.js';
import type { Connection } from '../connections/connection.js';
import { ConnectionRepository } from '../connections/connection.repository.js';
import { loadConfig } from '../config/app-config.js';
import { emptyStoreReport } from './reconcile-report.js';
import type { RunContext } from './reconcile-report.js';
import { RECONCILE_BUCKETS } from './reconcile-schedule.js';
import { ReconcileStoresRepository } from './reconcile-stores.repository.js';
import { StoreSchedule } from './store-schedule.js';

const INTERVAL_MS = 6 * 3_600_000;
const ALL = Array.from({ length: RECONCILE_BUCKETS }, (_, key) => key);

/**
 * The per-store schedule in PostgreSQL with the real migrations (docs/reference.md §13): a new
 * connection's stores go first, an older one's take slots in the interval, a run's outcomes move
 * them (the next turn, or a retry with backoff), a new subscription and a long stop put them first
 * again, and the progress counts them.
 */
describe('StoreSchedule (PostgreSQL)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let stores: ReconcileStoresRepository;
  let schedule: StoreSchedule;
  let fresh: Connection;
  let older: Connection;

  const rows = async (): Promise<Array<Record<string, unknown>>> =>
    dataSource.query(
      `SELECT connection_id::int AS connection, store_id AS store, priority, consecutive_failures AS failures,
              extract(epoch FROM next_due_at - now()) * 1000 AS due_in_ms, last_reconciled_at IS NOT NULL AS reconciled
         FROM reconcile_stores ORDER BY connection_id, store_id`,
    );

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource(database.url);
    const connections = new ConnectionRepository(dataSource, SecretCipher.fromKey(randomBytes(32)));
    for (const ownerId of ['4001', '4002'])
      await connections.create({
        authUrl: 'http://upstream.invalid',
        baseUrl: 'http://upstream.invalid',
        scopes: ['read_menu'],
        tokens: { accessToken: 'a', refreshToken: 'r', createdAt: new Date(), expiresIn: 3600, ownerId },
      });
    await dataSource.query(`UPDATE connections SET created_at = now() - interval '1 day' WHERE id = 2`);
    [fresh, older] = await connections.list();
    stores = new ReconcileStoresRepository(dataSource);
    schedule = new StoreSchedule(stores, loadConfig({ RECONCILE_INTERVAL: '6h' }));
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  it("a connection just made has its stores due now, as `connection`; an older one's take slots spread over the interval", async () => {
    await schedule.found(fresh, '4001', ['1', '2', '3']);
    await schedule.found(older, '4002', ['a', 'b', 'c', 'd', 'e']);
    const found = await rows();
    expect(found.map((row) => [row.connection, row.store, row.priority, row.failures])).toEqual([
      [1, '1', 'connection', 0],
      [1, '2', 'connection', 0],
      [1, '3', 'connection', 0],
      [2, 'a', null, 0],
      [2, 'b', null, 0],
      [2, 'c', null, 0],
      [2, 'd', null, 0],
      [2, 'e', null, 0],
    ]);
    for (const row of found.slice(0, 3)) expect(Number(row.due_in_ms)).toBeLessThanOrEqual(0);
    const later = found.slice(3).map((row) => Number(row.due_in_ms));
    for (const due of later) expect(due > -1000 && due < INTERVAL_MS).toBe(true);
    // 8 slots in all, the older connection's 5 in the gaps the 3 left: none of them within 1/8 of the interval of another.
    const slots = (await stores.slots()).sort((a, b) => a - b);
    for (let i = 1; i < slots.length; i++) expect(slots[i] - slots[i - 1]).toBeGreaterThan(1 / 16);
    // Found again: nothing changes.
    await schedule.found(older, '4002', ['a', 'b', 'c', 'd', 'e']);
    expect((await rows()).map((row) => row.priority)).toEqual(found.map((row) => row.priority));
    // Due now: only the new connection's, priorities first.
    expect((await stores.due(ALL, 10)).map((row) => [row.connectionId, row.storeId, row.ownedStores])).toEqual([
      [1, '1', 3],
      [1, '2', 3],
      [1, '3', 3],
    ]);
  });

  it('a run settles its stores: reconciled ones wait for their next turn, a failed one is retried after 15-30 s and keeps its priority', async () => {
    const context: RunContext = { runId: 'r', errors: [], notes: [], stores: [], notOwned: [] };
    for (const store of ['1', '2', '3']) context.stores.push(emptyStoreReport(1, store, '4001'));
    context.stores[1].errors.push('no snapshot within 300 s');
    await schedule.record(context, Date.now());
    const settled = (await rows()).slice(0, 3);
    expect(settled.map((row) => [row.store, row.priority, row.failures, row.reconciled])).toEqual([
      ['1', null, 0, true],
      ['2', 'connection', 1, false],
      ['3', null, 0, true],
    ]);
    for (const row of [settled[0], settled[2]]) {
      expect(Number(row.due_in_ms)).toBeGreaterThanOrEqual(INTERVAL_MS / 2 - 2000);
      expect(Number(row.due_in_ms)).toBeLessThanOrEqual(1.55 * INTERVAL_MS);
    }
    expect(Number(settled[1].due_in_ms)).toBeGreaterThan(14_000);
    expect(Number(settled[1].due_in_ms)).toBeLessThanOrEqual(30_000);
    expect(await stores.due(ALL, 10)).toEqual([]);
    expect(await stores.progress()).toMatchObject({ storesDone: 2, storesPending: 5, storesFailing: 1 });
  });

  it('a new subscription puts the stores of its connection first; after a long stop, every store not reconciled since goes first', async () => {
    await dataSource.query(
      `INSERT INTO subscriptions (connection_id, callback_uri, enabled_events, status) VALUES (2, 'http://127.0.0.1/cb', '{}', 'registered')`,
    );
    await schedule.found(older, '4002', ['a', 'b', 'c', 'd', 'e']);
    expect((await rows()).slice(3).map((row) => row.priority)).toEqual(Array(5).fill('subscription'));
    expect(await stores.heartbeat()).toBeNull();
    await dataSource.query(`UPDATE reconcile_schedule SET alive_at = now() - interval '1 hour'`);
    const before = await stores.heartbeat();
    expect(before).not.toBeNull();
    expect(Date.now() - before!).toBeGreaterThan(3_590_000);
    expect(Date.now() - before!).toBeLessThan(3_660_000);
    // Said again at once: the time just written.
    expect(Date.now() - (await stores.heartbeat())!).toBeLessThan(5000);
    // Stores 1 and 3 were reconciled after that: they keep their turn.
    expect(await stores.prioritizeAll('downtime', new Date(before!))).toBe(6);
    const after = await rows();
    expect(after.map((row) => [row.store, row.priority])).toEqual([
      ['1', null],
      ['2', 'connection'],
      ['3', null],
      ['a', 'subscription'],
      ['b', 'subscription'],
      ['c', 'subscription'],
      ['d', 'subscription'],
      ['e', 'subscription'],
    ]);
    // Due in the order they were put first: the subscription's, then the stop's.
    expect((await stores.due(ALL, 10)).map((row) => row.storeId)).toEqual(['a', 'b', 'c', 'd', 'e', '2']);
    expect((await stores.progress()).storesPending).toBe(5);
  });
});

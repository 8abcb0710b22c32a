import { randomBytes } from 'node:crypto';
import { EventEmitter2 } from '@nestjs/event-emitter';
import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource } from '../../test/support/database.js';
import type { TestDatabase } from '../../test/support/database.js';
import type { Connection } from '../connections/connection.js';
import { ConnectionRepository } from '../connections/connection.repository.js';
import { SecretCipher } from '../common/secret-cipher.js';
import { loadConfig } from '../config/app-config.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import { MetricsService } from '../observability/metrics.service.js';
import { PROJECTIONS } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { ProjectionStatusRepository } from '../projection/projection-status.repository.js';
import { ReadModelRepository } from '../query/read-model.repository.js';
import { UpstreamUnavailableError } from '../upstream/upstream.errors.js';
import { ProjectionCatchUp } from './projection-catch-up.js';
import { ReconcileRepository } from './reconcile.repository.js';
import { ConnectionReconciler } from './connection.reconciler.js';
import { ReconcilePass } from './reconcile-pass.js';
import { ReconcileService } from './reconcile.service.js';
import type { SnapshotResource } from './snapshot-diff.js';
import { StoreNotOfConnectionError } from './snapshot.fetcher.js';
import { ReconcileStoresRepository } from './reconcile-stores.repository.js';
import { StoreSchedule } from './store-schedule.js';
import type { FetchedList, SnapshotFetcher, StoreSnapshot } from './snapshot.fetcher.js';

type Fetch = (connection: Connection, storeId: string) => Promise<StoreSnapshot>;

const product = (id: string): SnapshotResource => ({
  id,
  type: 'product',
  attributes: { title: `P${id.slice(0, 10)}` },
  relationships: {},
});
const complete = (resources: SnapshotResource[] = []): FetchedList => ({ resources, complete: true });
/** Resource ids are the platform's, one space for every owner: each connection's here start with its id. */
const long = (connection: Connection) => String(connection.id).repeat(100);
const snapshotOf = (storeId: string, products: SnapshotResource[]): StoreSnapshot => ({
  storeId,
  fetchedAt: new Date(),
  menu: { collection: complete(), product: complete(products), trait: complete(), trait_option: complete() },
  orders: complete(),
});

/**
 * ReconcileService.run against PostgreSQL with the real migrations and repositories; only the
 * upstream is scripted (a fetcher per test). A fault in one connection's work must not cost the
 * others their run, nor the run its report.
 */
describe('ReconcileService.run (PostgreSQL)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let service: ReconcileService;
  let runs: ReconcileRepository;
  let projections: ProjectionRepository;
  let fetch: Fetch;
  let connections: ConnectionRepository;

  /**
   * Applies the whole log, as the daemon's projector would between runs. A page stops short of
   * entries whose transactions may still be in flight anywhere on the server (test files run in
   * parallel on one cluster), so it applies until no projection lags, not until a page is empty.
   */
  async function project(): Promise<void> {
    const statuses = new ProjectionStatusRepository(dataSource);
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    try {
      for (const projection of PROJECTIONS) {
        const deadline = Date.now() + 10_000;
        for (;;) {
          while ((await projections.applyPage(runner, projection, 1000)).entries > 0);
          if ((await statuses.lag((await statuses.status(projection)).checkpoint)) === 0) break;
          if (Date.now() > deadline) throw new Error(`projection ${projection.name} did not catch up with the log`);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
    } finally {
      await runner.release();
    }
  }

  /** A run whose upstream shows these products, applied: what a test needs to find already mirrored. */
  async function mirrored(products: (connection: Connection) => SnapshotResource[]): Promise<void> {
    fetch = async (connection, storeId) => snapshotOf(storeId, products(connection));
    expect((await service.run('command')).errors).toEqual([]);
    await project();
  }

  async function scheduled(): Promise<Array<Record<string, unknown>>> {
    return dataSource.query(
      `SELECT connection_id::int AS connection, store_id AS store, owned, consecutive_failures AS failures, last_error,
              last_reconciled_at IS NOT NULL AS reconciled, priority
         FROM reconcile_stores ORDER BY connection_id, store_id`,
    );
  }

  // A fresh database and the two connections (ids 1 and 2) for every test: none depends on another's leftovers.
  beforeEach(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource(database.url);
    connections = new ConnectionRepository(dataSource, SecretCipher.fromKey(randomBytes(32)));
    for (const ownerId of ['4001', '4002']) {
      await connections.create({
        authUrl: 'http://upstream.invalid',
        baseUrl: 'http://upstream.invalid',
        scopes: ['read_menu'],
        tokens: { accessToken: 'a', refreshToken: 'r', createdAt: new Date(), expiresIn: 3600, ownerId },
      });
    }
    projections = new ProjectionRepository();
    runs = new ReconcileRepository(dataSource);
    const fetcher = {
      fetch: (connection: Connection, storeId: string) => fetch(connection, storeId),
    } as unknown as SnapshotFetcher;
    const metrics = new MetricsService();
    const config = loadConfig({ STORE_IDS: '1' });
    const reconciler = new ConnectionReconciler(
      connections,
      new ReadModelRepository(dataSource),
      new EventLogRepository(dataSource),
      runs,
      new EventEmitter2(),
      metrics,
      config,
      null,
    );
    service = new ReconcileService(
      connections,
      reconciler,
      new ReconcilePass(fetcher, reconciler, config, { attempts: 2, baseDelayMs: 20 }),
      runs,
      new ProjectionCatchUp(dataSource, projections, new ProjectionStatusRepository(dataSource)),
      metrics,
      new StoreSchedule(new ReconcileStoresRepository(dataSource), config),
    );
  });

  afterEach(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  it('a store whose fetch fails is reported, tried again, given up after its attempts; the other connection is reconciled; the run is saved', async () => {
    const attempts = new Map<number, number>();
    fetch = async (connection, storeId) => {
      attempts.set(connection.id, (attempts.get(connection.id) ?? 0) + 1);
      if (connection.id === 1) throw new UpstreamUnavailableError('GET /stores/1/collections: connection reset');
      return snapshotOf(storeId, [product(`${connection.id}-7`)]);
    };
    const before = Date.now();
    const run = await service.run('command');
    expect(Object.fromEntries(attempts)).toEqual({ 1: 2, 2: 1 });
    expect(run).toMatchObject({
      outcome: 'partial',
      errors: [],
      stores: [
        expect.objectContaining({
          connection_id: 1,
          owner_id: '4001',
          events_appended: 0,
          notes: ['attempt 1 of 2: GET /stores/1/collections: connection reset; tried again later'],
          errors: ['attempt 2 of 2: GET /stores/1/collections: connection reset; nothing reconciled for this store'],
        }),
        expect.objectContaining({
          connection_id: 2,
          owner_id: '4002',
          differences: expect.objectContaining({ created: { product: 1 } }),
          events_appended: 1,
          errors: [],
        }),
      ],
    });
    expect((await runs.listRuns(1))[0]).toEqual(run);
    // The schedule learned both stores: the failing one is retried after 15-30 s, the other is done.
    expect(await scheduled()).toEqual([
      {
        connection: 1,
        store: '1',
        owned: true,
        failures: 1,
        last_error: 'attempt 2 of 2: GET /stores/1/collections: connection reset; nothing reconciled for this store',
        reconciled: false,
        priority: null,
      },
      { connection: 2, store: '1', owned: true, failures: 0, last_error: null, reconciled: true, priority: null },
    ]);
    const progress = await new ReconcileStoresRepository(dataSource).progress();
    expect({ ...progress, nextDueAt: undefined }).toEqual({
      storesDone: 1,
      storesPending: 0,
      storesFailing: 1,
      nextDueAt: undefined,
    });
    expect(progress.nextDueAt!.getTime()).toBeGreaterThanOrEqual(before + 15_000);
    expect(progress.nextDueAt!.getTime()).toBeLessThanOrEqual(Date.now() + 30_000);
  });

  it('a resource the log cannot hold is reported and skipped; a long id is hashed into the event id; the rest is appended', async () => {
    await mirrored((connection) => (connection.id === 2 ? [product('2-7')] : []));
    fetch = async (connection, storeId) =>
      snapshotOf(storeId, [product(`${connection.id}-7`), product(long(connection)), product('y'.repeat(300))]);
    const run = await service.run('command');
    const [first, second] = run.stores;
    expect(run.errors).toEqual([]);
    expect(first).toMatchObject({
      owner_id: '4001',
      events_appended: 2,
      differences: expect.objectContaining({ created: { product: 3 } }),
    });
    expect(second).toMatchObject({
      owner_id: '4002',
      events_appended: 1,
      differences: expect.objectContaining({ created: { product: 2 } }),
    });
    for (const store of [first, second])
      expect(store.errors).toEqual([
        expect.stringMatching(/^product "y{40}…" cannot be logged: .*255 characters; skipped$/),
      ]);
    expect(run.outcome).toBe('failed');
    const [logged] = await dataSource.query(
      `SELECT event_id FROM event_log WHERE subject_id = $1 AND owner_id = '4001'`,
      ['1'.repeat(100)],
    );
    expect(logged.event_id).toMatch(/^reconcile:[0-9a-f-]{36}:product:sha256-[0-9a-f]{32}$/);
  });

  it('a connection none of whose stores is its own (each answered 404) is an error; the others go on', async () => {
    await mirrored((connection) => (connection.id === 2 ? [product('2-7'), product(long(connection))] : []));
    fetch = async (connection, storeId) => {
      if (connection.id === 1) throw new StoreNotOfConnectionError(storeId, 404);
      return snapshotOf(storeId, [product(`${connection.id}-7`), product(long(connection))]);
    };
    const run = await service.run('command');
    expect(run).toMatchObject({
      outcome: 'partial',
      errors: ['connection 1: every store (1) answered 403/404 (a wrong UPSTREAM_SNAPSHOT_PATH?); nothing reconciled'],
      notes: ["connection 1: store 1 answered 404: not this connection's store, left out"],
      stores: [expect.objectContaining({ connection_id: 2, events_appended: 0, errors: [] })],
    });
    // Connection 1's store is not its owner's: kept out of the progress, looked at again next interval.
    expect((await scheduled()).map((row) => [row.connection, row.owned, row.failures])).toEqual([
      [1, false, 0],
      [2, true, 0],
    ]);
    expect(await new ReconcileStoresRepository(dataSource).progress()).toMatchObject({
      storesDone: 1,
      storesPending: 0,
      storesFailing: 0,
    });
  });

  it('a bug stops the run: the run is saved as failed, then the error is thrown', async () => {
    fetch = async () => {
      throw new TypeError("Cannot read properties of undefined (reading 'data')");
    };
    await expect(service.run('schedule')).rejects.toThrow(TypeError);
    const [saved] = await runs.listRuns(1);
    expect(saved).toMatchObject({
      trigger: 'schedule',
      outcome: 'failed',
      stores: [],
      errors: [expect.stringMatching(/^the run stopped: Cannot read properties/)],
    });
  });

  it('a connection whose owner no webhook has named yet is skipped, and the run says so', async () => {
    const unnamed = await connections.create({
      authUrl: 'http://upstream.invalid',
      baseUrl: 'http://upstream.invalid',
      scopes: ['read_menu'],
      tokens: { accessToken: 'a', refreshToken: 'r', createdAt: new Date(), expiresIn: 3600 },
    });
    const run = await service.run('command', { connectionId: unnamed.id });
    expect(run).toMatchObject({
      outcome: 'ok',
      stores: [],
      errors: [],
      notes: expect.arrayContaining([
        expect.stringMatching(new RegExp(`^connection ${unnamed.id}: its resource owner is not known yet`)),
      ]),
    });
  });
});

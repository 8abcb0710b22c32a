import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource, TestDatabase, useDatabase } from '../../test/support/database.js';
import { catchUp } from '../../test/support/projection.js';
import { allEntries, anEvent, expected, logEntry, readModel, Spec } from '../../test/support/projection-property.js';
import { ProjectionStatusRepository } from './projection-status.repository.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import { loadConfig } from '../config/app-config.js';
import { MetricsService } from '../observability/metrics.service.js';
import { fold } from '../domain/evolve.js';
import { toWebhookEvent } from './from-log-entry.js';
import type { WebhookEvent } from '../domain/webhook-event.js';
import { MENU_PROJECTION, ORDERS_PROJECTION, PROJECTIONS } from './projection-definitions.js';
import { ProjectionRepository } from './projection.repository.js';
import { ProjectorService } from './projector.service.js';
import { AppendSignal } from '../event-log/append-signal.js';
import { laneLock } from './projector-lane.js';
import { lockQuery } from '../database/advisory-locks.js';

describe('projection (PostgreSQL)', () => {
  it('applied to a shuffled log with duplicates, in pages of any size, equals the fold of the set (less the events missing their subject)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(anEvent, { minLength: 1, maxLength: 120 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 30 }),
        fc.infiniteStream(fc.double({ min: 0, max: 1, noNaN: true })),
        async (specs, pageSize, batchSize, randoms) => {
          const database = await createTestDatabase();
          const dataSource = await openDataSource(database.url, 4);
          try {
            const log = new EventLogRepository(dataSource);
            const projections = new ProjectionRepository();
            const delivered = [...specs, ...specs.filter(() => randoms.next().value < 0.3)]
              .sort(() => randoms.next().value - 0.5)
              .map(logEntry);
            const runner = dataSource.createQueryRunner();
            await runner.connect();
            await projections.prepareLane(runner);
            for (let i = 0; i < delivered.length; i += batchSize) {
              await log.append(delivered.slice(i, i + batchSize));
              if (randoms.next().value < 0.5) await projections.applyPage(runner, MENU_PROJECTION, pageSize);
            }
            const logged = await allEntries(log);
            await catchUp(projections, runner, PROJECTIONS, pageSize, logged.length);
            await runner.release();
            const missing = new Set(specs.filter((spec) => spec.missing).map((spec) => spec.eventId));
            const events = logged
              .map(toWebhookEvent)
              .filter((event): event is WebhookEvent => event !== null && !missing.has(event.eventId));
            expect(new Map([...(await readModel(dataSource))].sort())).toEqual(
              new Map([...expected(fold(events))].sort()),
            );
            const statuses = new ProjectionStatusRepository(dataSource);
            for (const projection of PROJECTIONS) {
              expect((await statuses.status(projection)).applied).toBe(logged.length);
            }
          } finally {
            await dataSource.destroy();
            await database.drop();
          }
        },
      ),
      { numRuns: 12, endOnFailure: true },
    );
  });

  describe('with a poisoned log', () => {
    const db = useDatabase();

    it('parks an event that cannot be applied, with its error, and applies the rest', async () => {
      const log = new EventLogRepository(db.dataSource);
      const projections = new ProjectionRepository();
      const spec = (eventId: string, subjectId: string): Spec => ({
        eventType: 'product.created',
        subjectType: 'product',
        subjectId,
        createdAt: '2024-01-01T00:00:00.000Z',
        seq: 1,
        eventId,
        title: 'ok',
      });
      const nul = logEntry(spec('nul', '2'));
      nul.payload = nul.payload.replace('"title":"ok product"', '"title":"a\\u0000b"');
      const missing = {
        ...logEntry(spec('missing', '3')),
        payload: JSON.stringify({ data: { id: 'missing' }, included: [] }),
      };
      await log.append([logEntry(spec('before', '1')), nul, missing, logEntry(spec('after', '4'))]);
      const runner = db.dataSource.createQueryRunner();
      await runner.connect();
      await projections.prepareLane(runner);
      const covered = { entries: 0, parked: 0 };
      const deadline = Date.now() + 30000;
      while (covered.entries < 4 && Date.now() < deadline) {
        const page = await projections.applyPage(runner, MENU_PROJECTION, 100);
        covered.entries += page.entries;
        covered.parked += page.parked;
        if (page.entries === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await runner.release();
      expect(covered).toEqual({ entries: 4, parked: 2 });
      const ids = (await db.dataSource.query(`SELECT id FROM proj_menu.products ORDER BY id`)).map(
        (row: { id: string }) => row.id,
      );
      expect(ids).toEqual(['1', '4']);
      const parked = await db.dataSource.query(`SELECT event_id, error FROM proj_menu.parked_events ORDER BY position`);
      expect(parked).toEqual([
        { event_id: 'nul', error: expect.stringMatching(/Unicode/) },
        { event_id: 'missing', error: expect.stringMatching(/subject/) },
      ]);
      expect(await new ProjectionStatusRepository(db.dataSource).status(MENU_PROJECTION)).toMatchObject({
        parked: 2,
        lastError: expect.any(String),
      });
    });

    it('retries parked events (for reconcile): those that still fail stay parked, one that applies now is released', async () => {
      const projections = new ProjectionRepository();
      const runner = db.dataSource.createQueryRunner();
      await runner.connect();
      try {
        expect(await projections.retryParked(runner, MENU_PROJECTION)).toEqual({ retried: 2, released: 0 });
        expect(
          (await db.dataSource.query(`SELECT event_id FROM proj_menu.parked_events ORDER BY position`)).map(
            (row: { event_id: string }) => row.event_id,
          ),
        ).toEqual(['nul', 'missing']);
        // As if 'after' had once failed for a reason since gone: parked, and absent from the read model.
        await db.dataSource.query(`DELETE FROM proj_menu.products WHERE id = '4'`);
        await db.dataSource.query(`INSERT INTO proj_menu.parked_events (position, event_id, error)
          SELECT position, event_id, 'a fault since gone' FROM event_log WHERE event_id = 'after'`);
        expect(await projections.retryParked(runner, MENU_PROJECTION)).toEqual({ retried: 3, released: 1 });
        // One short transaction per entry, each ended: none is left holding the lock or the horizon.
        expect(runner.isTransactionActive).toBe(false);
        expect(
          await db.dataSource.query(`SELECT event_id, error FROM proj_menu.parked_events ORDER BY position`),
        ).toEqual([
          { event_id: 'nul', error: expect.stringMatching(/Unicode/) },
          { event_id: 'missing', error: expect.stringMatching(/subject/) },
        ]);
      } finally {
        await runner.release();
      }
      const ids = (await db.dataSource.query(`SELECT id FROM proj_menu.products ORDER BY id`)).map(
        (row: { id: string }) => row.id,
      );
      expect(ids).toEqual(['1', '4']);
      expect(await new ProjectionStatusRepository(db.dataSource).status(MENU_PROJECTION)).toMatchObject({ parked: 2 });
      // The released entry published its change like a page does (reference §11); the parked ones published nothing.
      const published = await db.dataSource.query(
        `SELECT id, resource -> 'version' ->> 'event_id' AS event_id FROM change_log ORDER BY seq`,
      );
      expect(published).toEqual([
        { id: '1', event_id: 'before' },
        { id: '4', event_id: 'after' },
        { id: '4', event_id: 'after' },
      ]);
    });
  });

  describe('with poisoned events scattered through a large page', () => {
    const db = useDatabase();

    // Above SMALL_PAGE_ENTRIES: the page is tried as one statement with its range as literals, its
    // halves (at most 3,500) as the lane's prepared, generically planned statements.
    it('parks exactly the bad ones (found by bisection) and applies every other entry of the page', async () => {
      const log = new EventLogRepository(db.dataSource);
      const projections = new ProjectionRepository();
      const poisoned = new Set([17, 1000, 1001, 6999]);
      const entries = Array.from({ length: 7000 }, (_, i) => {
        const entry = logEntry({
          eventType: 'product.created',
          subjectType: 'product',
          subjectId: String(i),
          createdAt: '2024-01-01T00:00:00.000Z',
          seq: i,
          eventId: `e${i}`,
          title: 'ok',
        });
        if (poisoned.has(i)) entry.payload = entry.payload.replace('"title":"ok product"', '"title":"\\u0000"');
        return entry;
      });
      for (let i = 0; i < entries.length; i += 500) await log.append(entries.slice(i, i + 500));
      const runner = db.dataSource.createQueryRunner();
      await runner.connect();
      await projections.prepareLane(runner);
      await catchUp(projections, runner, [MENU_PROJECTION], 10_000, entries.length);
      await runner.release();
      const [{ count }] = await db.dataSource.query(`SELECT count(*)::int AS count FROM proj_menu.products`);
      expect(count).toBe(7000 - poisoned.size);
      const parked = await db.dataSource.query(`SELECT event_id FROM proj_menu.parked_events ORDER BY position`);
      expect(parked.map((row: { event_id: string }) => row.event_id)).toEqual([...poisoned].map((i) => `e${i}`));
    });
  });

  describe('a resource created, updated and destroyed within one page', () => {
    const db = useDatabase();

    // Both statements sort a page's versions once and look again only at the ids whose newest is a
    // destroy: the row keeps the destroy's version and its newest update's attributes (reference §4).
    it('keeps its newest update as its data, by the winners statement and by the full one alike', async () => {
      const log = new EventLogRepository(db.dataSource);
      const projections = new ProjectionRepository();
      const runner = db.dataSource.createQueryRunner();
      await runner.connect();
      await projections.prepareLane(runner);
      const lifeOf = (subjectId: string, prefix: string): Spec[] =>
        (['created', 'updated', 'destroyed'] as const).map((kind, i) => ({
          eventType: `product.${kind}`,
          subjectType: 'product',
          subjectId,
          createdAt: `2024-01-0${i + 1}T00:00:00.000Z`,
          seq: i + 1,
          eventId: `${prefix}-${kind}`,
          title: kind === 'created' ? 'one' : 'two',
        }));
      try {
        // Page 1: every winner has its subject, so the winners statement applies it.
        await log.append(lifeOf('11', 'a').map(logEntry));
        await catchUp(projections, runner, [MENU_PROJECTION], 100, 3);
        // Page 2: another product's winner lacks its subject, so the full statement applies the page.
        const missing: Spec = { ...lifeOf('22', 'missing')[0], missing: true };
        await log.append([...lifeOf('21', 'b'), missing].map(logEntry));
        await catchUp(projections, runner, [MENU_PROJECTION], 100, 7);
      } finally {
        await runner.release();
      }
      expect(
        await db.dataSource.query(
          `SELECT id, deleted, attributes ->> 'title' AS title, event_id, data_event_id FROM proj_menu.products ORDER BY id`,
        ),
      ).toEqual([
        { id: '11', deleted: true, title: 'two product', event_id: 'a-destroyed', data_event_id: 'a-updated' },
        { id: '21', deleted: true, title: 'two product', event_id: 'b-destroyed', data_event_id: 'b-updated' },
      ]);
      const parked = await db.dataSource.query(`SELECT event_id FROM proj_menu.parked_events`);
      expect(parked).toEqual([{ event_id: 'missing-created' }]);
    });
  });

  describe('two projectors on one database', () => {
    let database: TestDatabase;
    const sources: DataSource[] = [];

    beforeAll(async () => {
      database = await createTestDatabase();
    });
    afterAll(async () => {
      for (const source of sources) if (source.isInitialized) await source.destroy();
      await database.drop();
    });

    async function daemon(): Promise<{ dataSource: DataSource; projector: ProjectorService }> {
      const dataSource = await openDataSource(database.url, 4);
      sources.push(dataSource);
      const projector = new ProjectorService(
        dataSource,
        new ProjectionRepository(),
        new MetricsService(),
        loadConfig({}),
        new AppendSignal(dataSource),
      );
      projector.onApplicationBootstrap();
      return { dataSource, projector };
    }

    async function until(condition: () => Promise<boolean> | boolean, ms = 15000): Promise<void> {
      const deadline = Date.now() + ms;
      while (!(await condition())) {
        if (Date.now() > deadline) throw new Error('condition not met in time');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }

    it('never both apply; when the active one dies the standby continues from the checkpoint', async () => {
      const a = await daemon();
      await until(() => a.projector.state === 'running');
      const b = await daemon();
      await until(() => b.projector.state === 'standby');
      const log = new EventLogRepository(a.dataSource);
      const statuses = new ProjectionStatusRepository(a.dataSource);
      const product = (i: number) =>
        logEntry({
          eventType: 'product.updated',
          subjectType: 'product',
          subjectId: String(i % 7),
          createdAt: new Date(Date.UTC(2024, 0, 1, 0, 0, i)).toISOString(),
          seq: i,
          eventId: `e${i}`,
          title: `v${i}`,
        });
      for (let i = 0; i < 50; i++) await log.append([product(i)]);
      await until(async () => (await statuses.status(MENU_PROJECTION)).applied === 50);
      expect(b.projector.state).toBe('standby');

      // The active daemon dies: its connections (and with them the lock) are cut.
      await a.dataSource.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'menu-sync'
          AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory')`);
      await a.projector.beforeApplicationShutdown();
      const tail = new EventLogRepository(b.dataSource);
      for (let i = 50; i < 100; i++) await tail.append([product(i)]);
      await until(() => b.projector.state === 'running');
      const status = new ProjectionStatusRepository(b.dataSource);
      await until(async () => (await status.status(MENU_PROJECTION)).applied === 100);
      await b.projector.beforeApplicationShutdown();
      expect((await status.status(ORDERS_PROJECTION)).applied).toBe(100);
      const rows = await b.dataSource.query(
        `SELECT id, attributes ->> 'title' AS title FROM proj_menu.products ORDER BY id`,
      );
      expect(rows).toEqual(
        Array.from({ length: 7 }, (_, id) => ({ id: String(id), title: `v${93 + ((id - (93 % 7) + 7) % 7)} product` })),
      );
    });
  });

  describe('one lane per projection, each on a session holding its own lock', () => {
    let database: TestDatabase;
    let dataSource: DataSource;
    let projector: ProjectorService;

    beforeAll(async () => {
      database = await createTestDatabase();
      dataSource = await openDataSource(database.url, 4);
    });
    afterAll(async () => {
      await projector?.beforeApplicationShutdown();
      await dataSource.destroy();
      await database.drop();
    });

    async function until(condition: () => Promise<boolean> | boolean, ms = 15000): Promise<void> {
      const deadline = Date.now() + ms;
      while (!(await condition())) {
        if (Date.now() > deadline) throw new Error('condition not met in time');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }

    const applied = async () => {
      const statuses = new ProjectionStatusRepository(dataSource);
      return {
        menu: (await statuses.status(MENU_PROJECTION)).applied,
        orders: (await statuses.status(ORDERS_PROJECTION)).applied,
      };
    };
    const events = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, k) =>
        logEntry({
          eventType: (from + k) % 4 === 0 ? 'order.created' : 'product.updated',
          subjectType: (from + k) % 4 === 0 ? 'order' : 'product',
          subjectId: String(1 + ((from + k) % 9)),
          createdAt: new Date(Date.UTC(2024, 0, 1, 0, 0, from + k)).toISOString(),
          seq: from + k,
          eventId: `lane-${from + k}`,
          title: `v${from + k}`,
        }),
      );

    it('a lane whose lock another session holds waits (starting) while the other lane applies; then catches up', async () => {
      const holder = dataSource.createQueryRunner();
      await holder.connect();
      await holder.query(...lockQuery('pg_advisory_lock', laneLock(ORDERS_PROJECTION)));
      projector = new ProjectorService(
        dataSource,
        new ProjectionRepository(),
        new MetricsService(),
        loadConfig({}),
        new AppendSignal(dataSource),
      );
      projector.onApplicationBootstrap();
      await until(() => projector.stateOf('menu') === 'running');
      expect(projector.stateOf('orders')).toBe('starting');
      await new EventLogRepository(dataSource).append(events(0, 40));
      await until(async () => (await applied()).menu === 40);
      expect(await applied()).toEqual({ menu: 40, orders: 0 });
      expect(projector.stateOf('orders')).toBe('starting');

      await holder.query('SELECT pg_advisory_unlock_all()');
      await holder.release();
      await until(async () => (await applied()).orders === 40);
      expect(projector.stateOf('orders')).toBe('running');
      expect(await dataSource.query(`SELECT count(*)::int AS n FROM proj_orders.orders`)).toEqual([{ n: 9 }]);
    });

    it("when one lane's session dies, the projector starts over on new sessions and both projections catch up", async () => {
      const [{ pid }] = await dataSource.query(
        `SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
          WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted
            AND l.classid = $1 AND l.objid = $2 AND l.objsubid = 2`,
        laneLock(ORDERS_PROJECTION),
      );
      await dataSource.query('SELECT pg_terminate_backend($1)', [pid]);
      await new EventLogRepository(dataSource).append(events(40, 80));
      await until(async () => {
        const now = await applied();
        return now.menu === 80 && now.orders === 80;
      });
      await until(() => projector.stateOf('menu') === 'running' && projector.stateOf('orders') === 'running');
      const holders: Array<{ pid: number }> = await dataSource.query(
        `SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
          WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted AND l.classid = $1`,
        [laneLock(ORDERS_PROJECTION)[0]],
      );
      expect(holders).toHaveLength(2);
      expect(holders.map((holder) => holder.pid)).not.toContain(pid);
    });
  });
});

import { setTimeout as sleep } from 'node:timers/promises';
import { useDatabase } from '../../test/support/database.js';
import { logEntry } from '../../test/support/projection-property.js';
import { loadConfig } from '../config/app-config.js';
import { AppendSignal } from '../event-log/append-signal.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import { MetricsService } from '../observability/metrics.service.js';
import type { ProjectionDefinition } from './projection-definitions.js';
import { PageResult, ProjectionRepository } from './projection.repository.js';
import { ProjectorService } from './projector.service.js';

/** The real repository, counting each lane's pages. */
class CountingRepository extends ProjectionRepository {
  readonly pages = { menu: 0, orders: 0 };
  override async applyPage(...args: Parameters<ProjectionRepository['applyPage']>): Promise<PageResult> {
    const page = await super.applyPage(...args);
    this.pages[(args[1] as ProjectionDefinition).name]++;
    return page;
  }
}

describe('projector lanes wake for the event types they project (PostgreSQL)', () => {
  const db = useDatabase(4);
  let repository: CountingRepository;
  let projector: ProjectorService;

  afterAll(async () => {
    await projector?.beforeApplicationShutdown();
  });

  const entry = (k: number, order: boolean) =>
    logEntry({
      eventType: order ? 'order.created' : 'product.updated',
      subjectType: order ? 'order' : 'product',
      subjectId: String(1 + (k % 9)),
      createdAt: new Date(Date.UTC(2024, 0, 1, 0, 0, k)).toISOString(),
      seq: k,
      eventId: `wake-${k}`,
      title: `v${k}`,
    });

  async function until(condition: () => Promise<boolean>): Promise<void> {
    for (const deadline = Date.now() + 10_000; !(await condition()); await sleep(20))
      if (Date.now() > deadline) throw new Error('condition not met in time');
  }

  const checkpoint = async (schema: string) =>
    Number((await db.dataSource.query(`SELECT position FROM ${schema}.checkpoint`))[0].position);

  it('a stream of menu appends runs the menu lane at each one and the orders lane only at its poll; an order append wakes the orders lane', async () => {
    repository = new CountingRepository();
    projector = new ProjectorService(
      db.dataSource,
      repository,
      new MetricsService(),
      loadConfig({}),
      new AppendSignal(db.dataSource),
    );
    projector.onApplicationBootstrap();
    const log = new EventLogRepository(db.dataSource);
    await until(async () => projector.stateOf('menu') === 'running' && projector.stateOf('orders') === 'running');
    await sleep(100);

    const before = { ...repository.pages };
    for (let k = 0; k < 12; k++) {
      const [appended] = await log.append([entry(k, false)]);
      projector.onAppended({ head: appended.position, eventTypes: ['product.updated'] });
      await sleep(50);
    }
    await until(async () => (await checkpoint('proj_menu')) === 12);
    const menuPages = repository.pages.menu - before.menu;
    const ordersPages = repository.pages.orders - before.orders;
    // 12 wakes over about 0.6 s: the menu lane pages for each; the orders lane's one-second poll fires once at most.
    expect([menuPages >= 12, ordersPages <= 1]).toEqual([true, true]);

    const [order] = await log.append([entry(12, true)]);
    projector.onAppended({ head: order.position, eventTypes: ['order.created'] });
    await until(async () => (await checkpoint('proj_orders')) === order.position);
    expect(await db.dataSource.query(`SELECT id FROM proj_orders.orders`)).toEqual([{ id: '4' }]);
  });
});

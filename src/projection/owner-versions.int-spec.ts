import { randomUUID } from 'node:crypto';
import type { DataSource, QueryRunner } from 'typeorm';
import { createTestDatabase, openDataSource, TestDatabase } from '../../test/support/database.js';
import { newLogEntry } from '../../test/support/event-log.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import type { NewLogEntry } from '../event-log/log-entry.js';
import { MENU_PROJECTION } from './projection-definitions.js';
import { ProjectionRepository } from './projection.repository.js';
import { ProjectionStatusRepository } from './projection-status.repository.js';
import { MENU_RESOURCE_TYPES } from './published-changes.js';

/** A product.created/updated entry of `ownerId`, at `minute` past midnight (later = newer). */
function productEvent(id: string, ownerId: string, minute: number, kind = 'updated'): NewLogEntry {
  return newLogEntry({
    eventId: randomUUID(),
    eventType: `product.${kind}`,
    subjectId: id,
    ownerId,
    occurredAt: new Date(Date.UTC(2024, 0, 1, 0, minute)).toISOString(),
    seq: null,
    included: [{ id, type: 'product', attributes: { title: `${id} of ${ownerId}` }, relationships: {} }],
  });
}

/**
 * The owner versions (the `/menu` ETag) of a page, for each way the page statement finds the owners
 * rows had before it: from the change log's `_before` rows when the table publishes, else by id
 * lookup on a small page and by a join on a large one (more than 5,000 entries).
 */
describe.each([
  { publishes: 'publishing', types: MENU_RESOURCE_TYPES, fillers: 0 },
  { publishes: 'publishing', types: MENU_RESOURCE_TYPES, fillers: 6_000 },
  { publishes: 'not publishing', types: [], fillers: 0 },
  { publishes: 'not publishing', types: [], fillers: 6_000 },
])('owner versions, $publishes, page with $fillers other entries', ({ types, fillers }) => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let runner: QueryRunner;
  let log: EventLogRepository;
  let projections: ProjectionRepository;
  let statuses: ProjectionStatusRepository;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource(database.url, 4);
    log = new EventLogRepository(dataSource);
    projections = new ProjectionRepository(types);
    statuses = new ProjectionStatusRepository(dataSource);
    runner = dataSource.createQueryRunner();
    await runner.connect();
    await projections.prepare(runner);
  });
  afterAll(async () => {
    await runner.release();
    await dataSource.destroy();
    await database.drop();
  });

  async function project(): Promise<void> {
    const deadline = Date.now() + 30_000;
    const total = Number((await dataSource.query(`SELECT count(*) AS n FROM event_log`))[0].n);
    while ((await statuses.status(MENU_PROJECTION)).applied < total) {
      if (Date.now() > deadline) throw new Error('the menu projection did not catch up');
      if ((await projections.applyPage(runner, MENU_PROJECTION, 100_000)).entries === 0)
        await new Promise((r) => setTimeout(r, 20));
    }
  }

  async function versions(): Promise<Record<string, string>> {
    const rows: Array<{ owner_id: string; version: string }> = await dataSource.query(
      `SELECT owner_id, version::text AS version FROM proj_menu.owner_versions`,
    );
    return Object.fromEntries(rows.map((row) => [row.owner_id, row.version]));
  }

  it('a product moved to another owner changes both menus; an owner left alone keeps its version', async () => {
    await log.append([
      productEvent('1', 'alice', 1, 'created'),
      productEvent('2', 'bob', 1, 'created'),
      productEvent('3', 'carol', 1, 'created'),
    ]);
    await project();
    const before = await versions();
    expect(Object.keys(before).sort()).toEqual(['alice', 'bob', 'carol']);

    const others = Array.from({ length: fillers }, (_, i) => productEvent(`filler-${i}`, 'dave', 2, 'created'));
    await log.append([productEvent('1', 'bob', 2), ...others]);
    await project();
    const after = await versions();
    expect(after.alice).not.toBe(before.alice);
    expect(after.bob).not.toBe(before.bob);
    expect(after.carol).toBe(before.carol);

    // An older event of carol's product changes nothing: no version moves.
    await log.append([productEvent('3', 'carol', 0)]);
    await project();
    expect(await versions()).toEqual(after);
  });
});

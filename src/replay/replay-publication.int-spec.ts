import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource, TestDatabase } from '../../test/support/database.js';
import { eventually } from '../../test/support/eventually.js';
import { catchUp } from '../../test/support/projection.js';
import { newLogEntry } from '../../test/support/event-log.js';
import { ChangeLogRepository } from '../changes/change-log.repository.js';
import { Change, START } from '../changes/change.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import type { NewLogEntry } from '../event-log/log-entry.js';
import { MENU_PROJECTION, PROJECTIONS } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { ProjectionStatusRepository } from '../projection/projection-status.repository.js';
import { RebuildService } from './rebuild.service.js';
import { ShadowSchemaRepository } from './shadow-schema.repository.js';

function created(type: string, id: string, title: string, at: string): NewLogEntry {
  return newLogEntry({
    eventId: `${type}-${id}-${title}`,
    eventType: `${type}.created`,
    subjectId: id,
    occurredAt: at,
    seq: 1,
    included: [{ id, type, attributes: { title }, relationships: {} }],
  });
}

describe('a replay swap publishes exactly what it changes (PostgreSQL)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource(database.url, 6);
  });

  afterAll(async () => {
    await dataSource.destroy();
    await database.drop();
  });

  async function changesAfter(after = START): Promise<{ changes: Change[]; next: typeof START }> {
    const page = await new ChangeLogRepository(dataSource).readAfter(after, { limit: 1000 });
    return { changes: page.changes.map((entry) => entry.change), next: page.next };
  }

  it('one change per drifted resource (changed, lost, invented), none for the rest; the log then folds to the rebuilt model', async () => {
    const projections = new ProjectionRepository();
    const statuses = new ProjectionStatusRepository(dataSource);
    await new EventLogRepository(dataSource).append([
      ...['1', '2', '3', '4'].map((id) => created('product', id, 'ok', '2024-01-01T00:00:00.000Z')),
      created('collection', '9', 'ok', '2024-01-01T00:00:00.000Z'),
    ]);
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    await projections.prepare(runner);
    // A transaction of another test's database can hold the log's horizon (and so these readers) back for a moment.
    await catchUp(projections, runner, PROJECTIONS, 1000, 5);
    await runner.release();
    const before = await eventually(async () => {
      const read = await changesAfter();
      expect(read.changes).toHaveLength(5);
      return read;
    });

    // Drift, as a bug or a hand edit would leave it: one changed, one lost, one invented.
    await dataSource.query(`UPDATE proj_menu.products SET attributes = '{"title":"drifted"}' WHERE id = '1'`);
    await dataSource.query(`DELETE FROM proj_menu.products WHERE id = '2'`);
    await dataSource.query(`INSERT INTO proj_menu.products (id, owner_id, deleted, occurred_at, event_seq, event_id, position)
                            VALUES ('77', '42', false, now(), 1, 'invented', 999)`);

    await new RebuildService(dataSource, projections, statuses, new ShadowSchemaRepository()).replay(MENU_PROJECTION);
    const published = await eventually(async () => {
      const read = (await changesAfter(before.next)).changes;
      expect(read.map((change) => [change.type, change.id, change.op]).sort()).toEqual([
        ['product', '1', 'upsert'],
        ['product', '2', 'upsert'],
        ['product', '77', 'delete'],
      ]);
      return read;
    });
    expect(published.find((change) => change.id === '1')!.resource.attributes).toEqual({ title: 'ok' });
    expect(published.find((change) => change.id === '77')!.resource).toMatchObject({
      deleted: true,
      version: { event_id: 'invented' },
    });

    const folded = new Map<string, Change>();
    for (const change of (await changesAfter()).changes) folded.set(`${change.type}/${change.id}`, change);
    const live = [...folded.values()]
      .filter((change) => !change.resource.deleted)
      .map((change) => `${change.type}/${change.id}`)
      .sort();
    expect(live).toEqual(['collection/9', 'product/1', 'product/2', 'product/3', 'product/4']);

    // A second replay finds nothing to change, and publishes nothing.
    const after = await eventually(async () => {
      const read = await changesAfter(before.next);
      expect(read.changes).toHaveLength(3);
      return read;
    });
    await new RebuildService(dataSource, projections, statuses, new ShadowSchemaRepository()).replay(MENU_PROJECTION);
    expect((await changesAfter(after.next)).changes).toEqual([]);
  });
});

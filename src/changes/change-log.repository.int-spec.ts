import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource, TestDatabase } from '../../test/support/database.js';
import { START } from './change.js';
import { ChangeLogRepository } from './change-log.repository.js';
import { eventually } from '../../test/support/eventually.js';

/** Writes one change the way the read-model statements do (resource built by menu_sync_resource). */
async function write(
  db: { query: DataSource['query'] },
  type: string,
  id: string,
  owner = '7',
  position = 1,
): Promise<void> {
  await db.query(
    `INSERT INTO change_log (change_id, type, id, owner_id, op, resource)
     VALUES ($1, $2, $3, $4, 'upsert', menu_sync_resource($2, $3, $4, '{"name":"x"}', '{}', $5, '2024-05-01T10:00:00.123456Z', $6, false))`,
    [`${type}:${id}:${position}`, type, id, owner, `event-${position}`, position],
  );
}

describe('ChangeLogRepository (PostgreSQL)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let repository: ChangeLogRepository;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource(database.url, 10);
    repository = new ChangeLogRepository(dataSource);
  });

  afterAll(async () => {
    await dataSource.destroy();
    await database.drop();
  });

  it('reads changes in the API shape, and never past a transaction still open (a late commit is not skipped)', async () => {
    await write(dataSource, 'product', '1', '7', 1);
    const late = dataSource.createQueryRunner();
    await late.connect();
    await late.startTransaction();
    await write(late, 'product', '2', '7', 2);
    await write(dataSource, 'product', '3', '7', 3);

    // A transaction of another database that ends while the horizon is read holds readers back for
    // that read (the safe side): reads are retried until they settle.
    const first = await eventually(
      async () => {
        const page = await repository.readAfter(START, { limit: 10 });
        expect(page.changes.map((entry) => entry.change.id)).toEqual(['1']);
        return page;
      },
      5_000,
      20,
    );
    expect(first.changes[0].change).toMatchObject({
      seq: expect.any(Number),
      change_id: 'product:1:1',
      type: 'product',
      id: '1',
      owner_id: '7',
      op: 'upsert',
      resource: {
        type: 'product',
        id: '1',
        owner_id: '7',
        attributes: { name: 'x' },
        relationships: {},
        version: { event_id: 'event-1', occurred_at: '2024-05-01T10:00:00.123Z', position: 1 },
        deleted: false,
      },
    });
    expect(Object.keys(first.changes[0].change.resource)).toEqual([
      'type',
      'id',
      'owner_id',
      'attributes',
      'relationships',
      'version',
      'deleted',
    ]);

    await late.commitTransaction();
    await late.release();
    await eventually(
      async () =>
        expect((await repository.readAfter(first.next, { limit: 10 })).changes.map((entry) => entry.change.id)).toEqual(
          ['2', '3'],
        ),
      5_000,
      20,
    );
    expect(await repository.head()).toBe(3);
  });

  it('filters by type and owner, and moves past what the filters leave out', async () => {
    const before = { next: await repository.positionInSnapshot(dataSource) };
    await write(dataSource, 'collection', '1', '8', 4);
    await write(dataSource, 'trait', '1', '7', 5);
    const all = await eventually(
      async () => {
        const page = await repository.readAfter(before.next, { limit: 10 });
        expect(page.changes).toHaveLength(2);
        return page;
      },
      5_000,
      20,
    );
    const filtered = await eventually(
      async () => {
        const page = await repository.readAfter(before.next, { limit: 10, types: ['trait'], ownerIds: ['7'] });
        expect(page.changes.map((entry) => entry.change.type)).toEqual(['trait']);
        expect(page.next).toEqual(all.next);
        return page;
      },
      5_000,
      20,
    );
    await eventually(
      async () => {
        const none = await repository.readAfter(filtered.next, { limit: 10, types: ['collection'] });
        expect(none.changes).toEqual([]);
        expect(none.next).toEqual(filtered.next);
        const skipped = await repository.readAfter(before.next, { limit: 10, types: ['store'] });
        expect(skipped.changes).toEqual([]);
        expect(skipped.next).toEqual(filtered.next);
      },
      5_000,
      20,
    );
  });

  it('ends a filtered read and a snapshot cursor at the numerically last change, where seq gains a digit inside one transaction', async () => {
    const before = { next: await repository.positionInSnapshot(dataSource) };
    // One transaction writing 100 changes: its seqs cross 9 -> 10 or 99 -> 100, where text order and number order part.
    await dataSource.transaction(async (db) => {
      for (let i = 0; i < 100; i++) await write(db, 'product', `digits-${i}`, '9', 100 + i);
    });
    const all = await eventually(
      async () => {
        const page = await repository.readAfter(before.next, { limit: 1000 });
        expect(page.changes).toHaveLength(100);
        return page;
      },
      5_000,
      20,
    );
    const last = all.changes.at(-1)!.position;
    const filtered = await eventually(
      async () => {
        const page = await repository.readAfter(before.next, { limit: 1000, ownerIds: ['9'] });
        expect(page.changes).toHaveLength(100);
        return page;
      },
      5_000,
      20,
    );
    expect(filtered.next).toEqual(last);
    expect((await repository.readAfter(filtered.next, { limit: 1000, ownerIds: ['9'] })).changes).toEqual([]);
    expect(await repository.positionInSnapshot(dataSource)).toEqual(last);
  });

  it('compacts to the newest change per resource and raises the horizon to the highest deleted', async () => {
    await write(dataSource, 'product', '1', '7', 10);
    await write(dataSource, 'product', '1', '7', 11);
    // Compaction, like a reader, stops below a transaction still in progress (one of another test's
    // database not yet shown in pg_stat_activity counts): once a read has all up to the last write,
    // no transaction older than it is left, and compaction sees what that read saw.
    const all = await eventually(
      async () => {
        const page = await repository.readAfter(START, { limit: 1000 });
        expect(page.changes.map((entry) => entry.change.change_id)).toContain('product:1:11');
        return page;
      },
      5_000,
      20,
    );
    expect(await repository.compact(new Date(Date.now() + 60_000))).toBe(2);
    const kept = await repository.readAfter(START, { limit: 1000 });
    expect(kept.changes.map((entry) => entry.change.change_id)).toEqual(
      all.changes.map((entry) => entry.change.change_id).filter((id) => id !== 'product:1:1' && id !== 'product:1:10'),
    );
    const horizon = await repository.compactionHorizon();
    expect(horizon.seq).toBe(
      String(all.changes.find((entry) => entry.change.change_id === 'product:1:10')!.change.seq),
    );
    expect(await repository.compact(new Date(Date.now() + 60_000))).toBe(0);
    expect(await repository.compactionHorizon()).toEqual(horizon);
  });
});

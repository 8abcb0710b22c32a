import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource, TestDatabase } from '../../test/support/database.js';
import { ChangeFilter, START } from './change.js';
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
    await repository.onApplicationShutdown();
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
    const before = await repository.compactionHorizon();
    expect(await repository.compact(new Date(0))).toBe(0);
    expect(await repository.compactionHorizon()).toEqual(before);
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

  it('reads below an earlier page’s horizon as below the current one, and reads a short page again below the current one', async () => {
    for (const id of ['h1', 'h2', 'h3']) await write(dataSource, 'product', id, 'horizon');
    const filter: ChangeFilter = { limit: 2, ownerIds: ['horizon'] };
    const first = await eventually(async () => {
      const page = await repository.readAfter(START, { ...filter, limit: 3 });
      expect(page.changes.map((entry) => entry.change.id)).toEqual(['h1', 'h2', 'h3']);
      return repository.readAfter(START, filter);
    });
    expect(first.horizon).toMatch(/^[0-9]+$/);
    expect(await repository.readAfter(START, { ...filter, horizon: first.horizon })).toEqual(first);

    await write(dataSource, 'product', 'h4', 'horizon');
    // Written after that horizon was read: a page short below it is read again below the current one.
    const rest = await eventually(async () => {
      const page = await repository.readTextsAfter(first.next, { ...filter, horizon: first.horizon });
      expect(page.changes.map((change) => change.id)).toEqual(['h3', 'h4']);
      return page;
    });
    expect(BigInt(rest.horizon!)).toBeGreaterThan(BigInt(first.horizon!));
  });

  it('reads each change as the JSON text of the change readAfter reads: the same values, keys in the same order', async () => {
    const text = fc.string({ unit: 'binary', maxLength: 12 }).filter((value) => !value.includes('\u0000'));
    const json = fc
      .jsonValue({ maxDepth: 3, stringUnit: 'binary' })
      .filter((value) => !JSON.stringify(value).includes('\\u0000'));
    const change = fc.record({
      id: text,
      owner: fc.option(text),
      op: fc.constantFrom('upsert', 'delete'),
      attributes: json,
      relationships: json,
      eventId: text,
      occurredAt: fc.date({
        min: new Date('2000-01-01T00:00:00Z'),
        max: new Date('2100-01-01T00:00:00Z'),
        noInvalidDate: true,
      }),
      microseconds: fc.integer({ min: 0, max: 999 }),
      position: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
      deleted: fc.boolean(),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(change, { minLength: 1, maxLength: 5 }), async (changes) => {
        const type = `text-${run++}`;
        for (const [n, c] of changes.entries()) {
          // `at` with microseconds: both readers show milliseconds, truncated.
          const at = `${c.occurredAt.toISOString().slice(0, -1)}${String(c.microseconds).padStart(3, '0')}Z`;
          await dataSource.query(
            `INSERT INTO change_log (change_id, type, id, owner_id, op, resource, at)
             VALUES ($1, $2, $3, $4, $5, menu_sync_resource($2, $3, $4, $6, $7, $8, $9, $10, $11), $12)`,
            [
              `${type}:${n}`,
              type,
              c.id,
              c.owner,
              c.op,
              JSON.stringify(c.attributes),
              JSON.stringify(c.relationships),
              c.eventId,
              c.occurredAt,
              c.position,
              c.deleted,
              at,
            ],
          );
        }
        const filter = { limit: 10, types: [type] };
        const entries = await eventually(async () => {
          const page = await repository.readAfter(START, filter);
          expect(page.changes).toHaveLength(changes.length);
          return page.changes;
        });
        // Either read may be held back by a transaction of another database ending meanwhile (see above).
        const texts = await eventually(async () => {
          const page = await repository.readTextsAfter(START, filter);
          expect(page.changes).toHaveLength(changes.length);
          return page.changes;
        });
        expect(texts.map((t) => JSON.stringify(JSON.parse(t.json)))).toEqual(
          entries.map((e) => JSON.stringify(e.change)),
        );
        expect(
          texts.map(({ position, seq, changeId, type, id, ownerId }) => ({
            position,
            seq,
            changeId,
            type,
            id,
            ownerId,
          })),
        ).toEqual(
          entries.map(({ position, change }) => ({
            position,
            seq: change.seq,
            changeId: change.change_id,
            type: change.type,
            id: change.id,
            ownerId: change.owner_id,
          })),
        );
      }),
      { numRuns: 40 },
    );
  });
});

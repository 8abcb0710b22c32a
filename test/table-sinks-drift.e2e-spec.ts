import { randomUUID } from 'node:crypto';
import { decodeChangeCursor } from '../src/changes/change-cursor.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN } from './support/http.js';
import { settledSink } from './support/sink-receiver.js';
import { useDriftWorld } from './support/table-sink-drift.js';
import { mysqlReader, postgresReader } from './support/table-sink-scenarios.js';

type Json = any;

describe('table sinks whose tables lost a column or a table by hand: re-added and re-filled, or failing (docs/reference.md §12)', () => {
  const { world, createSinks, deliverProducts, expectProductsEqualToApi, attempts, verify } = useDriftWorld();

  /**
   * The newest attempt committed the batch after re-creating `tables` and re-filling them (`rows`
   * each) from `from`; a change-log refill names the target's cursor, where the last batch before it ended.
   */
  async function expectRecreated(sinkId: string, tables: Array<[string, number]>, from: 'change log' | string) {
    await eventually(async () => {
      const list = await attempts(sinkId);
      const newest = list[0];
      expect(newest).toMatchObject({ outcome: 'ok', status: 'committed' });
      const said = tables.map(([table, rows]) =>
        from === 'change log'
          ? new RegExp(
              `^re-created ${table} \\(missing\\) and re-filled ${rows} rows from the change log at ([A-Za-z0-9_-]+)$`,
            )
          : new RegExp(`^re-created ${table} \\(missing\\) and re-filled ${rows} rows from ${from}$`),
      );
      const [committed, ...refills] = (newest.response as string).split('; ');
      expect(committed).toBe('committed: 1 change, one per row (1 upsert, 0 deletes)');
      expect(refills.length).toBe(said.length);
      refills.forEach((text, index) => expect(text).toMatch(said[index]));
      if (from !== 'change log') return;
      const before = list.slice(1).find((attempt) => attempt.outcome === 'ok');
      const at = decodeChangeCursor(said[0].exec(refills[0])![1]);
      expect(at.seq).toBe(String(before.batch.last_seq));
    });
  }

  it('a column dropped by hand: the write fails with the database’s error, then the sink re-adds the column, re-fills every row from its resource and says so; the table ends equal to the API', async () => {
    const { pgTarget, myTarget } = world;
    const owner = `dropped-${randomUUID().slice(0, 6)}`;
    const [pgId, myId] = await createSinks(owner, 'dropped');
    const readers = [postgresReader(pgTarget, 'dropped'), mysqlReader(myTarget, 'dropped_')];
    await deliverProducts(owner, [1, 2, 3, 4, 5, 6, 7, 8, 9], (id) => `Product ${id}`);
    await expectProductsEqualToApi(pgId, owner, readers[0]);
    await expectProductsEqualToApi(myId, owner, readers[1]);

    await pgTarget.admin.query(`ALTER TABLE dropped.products DROP COLUMN title`);
    await myTarget.admin.query('ALTER TABLE `dropped_products` DROP COLUMN title');
    await deliverProducts(owner, [10], () => 'Product 10');

    for (const [id, reader] of [
      [pgId, readers[0]],
      [myId, readers[1]],
    ] as const)
      await expectProductsEqualToApi(id, owner, reader);
    const titles = await pgTarget.admin.query(
      `SELECT count(*)::int AS n FROM dropped.products WHERE title IS NOT NULL`,
    );
    const [myTitles] = await myTarget.admin.query(
      'SELECT count(*) AS n FROM `dropped_products` WHERE title IS NOT NULL',
    );
    expect([titles.rows[0].n, Number((myTitles as Json[])[0].n)]).toEqual([10, 10]);

    // The sink said so: the failed write with the database's error, then the batch that re-filled.
    for (const [id, status, error, table] of [
      [pgId, '42703', 'PostgreSQL error 42703: column "title" of relation "products" does not exist', 'products'],
      [
        myId,
        1054,
        "MySQL error ER_BAD_FIELD_ERROR (1054): Unknown column 'title' in 'INSERT INTO'",
        'dropped_products',
      ],
    ] as const) {
      await eventually(async () => {
        const [newest, ...older] = await attempts(id);
        expect(newest).toMatchObject({
          outcome: 'ok',
          status: 'committed',
          response: `committed: 1 change, one per row (1 upsert, 0 deletes); re-added ${table}.title (missing) and re-filled 9 rows from their resource`,
        });
        expect(older.find((attempt) => attempt.outcome !== 'ok')).toMatchObject({ outcome: 'retry', status, error });
      });
    }
  }, 120_000);

  it('relational layout: a column of a type’s table dropped by hand is re-added and re-filled from each row’s resource; a child table’s is not: the sink fails until it is back, and sinks verify --repair re-fills it', async () => {
    const { app, pgTarget, myTarget } = world;
    const owner = `dropped-rel-${randomUUID().slice(0, 6)}`;
    const [pgId, myId] = await createSinks(owner, 'dropped_rel', ['product'], 'relational');
    const readers = [postgresReader(pgTarget, 'dropped_rel'), mysqlReader(myTarget, 'dropped_rel_')];
    await deliverProducts(owner, [1, 2, 3], (id) => `Product ${id}`);
    await expectProductsEqualToApi(pgId, owner, readers[0], 'relational');
    await expectProductsEqualToApi(myId, owner, readers[1], 'relational');

    await pgTarget.admin.query(`ALTER TABLE dropped_rel.products DROP COLUMN title`);
    await myTarget.admin.query('ALTER TABLE `dropped_rel_products` DROP COLUMN title');
    await deliverProducts(owner, [4], () => 'Product 4');
    await expectProductsEqualToApi(pgId, owner, readers[0], 'relational');
    await expectProductsEqualToApi(myId, owner, readers[1], 'relational');
    for (const [id, table] of [
      [pgId, 'products'],
      [myId, 'dropped_rel_products'],
    ] as const)
      await eventually(async () => {
        const [newest] = await attempts(id);
        expect(newest.response).toBe(
          `committed: 1 change, one per row (1 upsert, 0 deletes); re-added ${table}.title (missing) and re-filled 3 rows from their resource`,
        );
      });

    await pgTarget.admin.query(`ALTER TABLE dropped_rel.product_prices DROP COLUMN format`);
    await myTarget.admin.query('ALTER TABLE `dropped_rel_product_prices` DROP COLUMN format');
    await deliverProducts(owner, [5], () => 'Product 5');
    await settledSink(
      app.url,
      pgId,
      { state: 'failing', lag: 1, last_error: expect.stringContaining('PostgreSQL error 42703: column "format"') },
      30_000,
    );
    await settledSink(
      app.url,
      myId,
      {
        state: 'failing',
        lag: 1,
        last_error: expect.stringContaining("MySQL error ER_BAD_FIELD_ERROR (1054): Unknown column 'format'"),
      },
      30_000,
    );

    await pgTarget.admin.query(`ALTER TABLE dropped_rel.product_prices ADD COLUMN format text`);
    await myTarget.admin.query('ALTER TABLE `dropped_rel_product_prices` ADD COLUMN format LONGTEXT');
    for (const id of [pgId, myId]) {
      const resumed = await api(app.url, `/api/v1/sinks/${id}`, API_TOKEN, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ state: 'active' }),
      });
      expect(resumed.status).toBe(200);
    }
    const [pgPrices, myPrices] = [
      await pgTarget.admin.query(
        `SELECT product_id::text AS id FROM dropped_rel.product_prices WHERE format IS NULL ORDER BY 1`,
      ),
      (
        await myTarget.admin.query(
          'SELECT CAST(product_id AS CHAR) AS id FROM `dropped_rel_product_prices` WHERE format IS NULL ORDER BY 1',
        )
      )[0],
    ];
    // The rows written before the drop keep an empty format, until sinks verify --repair.
    expect([pgPrices.rows.length, (myPrices as Json[]).length]).toEqual([4, 4]);
    await eventually(async () => {
      for (const id of [pgId, myId])
        expect((await api(app.url, `/api/v1/sinks/${id}`)).json.data).toMatchObject({ state: 'active', lag: 0 });
    }, 60_000);
    const key = (id: string) => ({ owner_id: owner, id: `${id}/GBP` });
    for (const [id, prefix, reader] of [
      [pgId, '', readers[0]],
      [myId, 'dropped_rel_', readers[1]],
    ] as const) {
      const named = await verify([id, '--json']);
      expect(named.code).toBe(1);
      const types = (JSON.parse(named.stdout) as Json).data.types as Json[];
      expect(types.filter((type) => !type.equal).map((type) => [type.table, type.changed])).toEqual([
        [`${prefix}product_prices`, [key('1'), key('2'), key('3'), key('4')]],
      ]);
      expect((await verify([id, '--repair'])).code).toBe(0);
      await expectProductsEqualToApi(id, owner, reader, 'relational');
    }
    expect(
      (await pgTarget.admin.query(`SELECT count(*)::int AS n FROM dropped_rel.product_prices WHERE format IS NULL`))
        .rows[0].n,
    ).toBe(0);
  }, 180_000);

  it('a table dropped by hand: the next batch re-creates it and re-fills every live row at the target’s cursor; the table ends equal to the API, the sink active, the attempt names the refill', async () => {
    const { pgTarget, myTarget } = world;
    const owner = `gone-${randomUUID().slice(0, 6)}`;
    const [pgId, myId] = await createSinks(owner, 'gone');
    const readers = [postgresReader(pgTarget, 'gone'), mysqlReader(myTarget, 'gone_')];
    await deliverProducts(owner, [1, 2, 3, 4], (id) => `Product ${id}`);
    await expectProductsEqualToApi(pgId, owner, readers[0]);
    await expectProductsEqualToApi(myId, owner, readers[1]);
    await pgTarget.admin.query('DROP TABLE gone.products');
    await myTarget.admin.query('DROP TABLE `gone_products`');
    await deliverProducts(owner, [5], () => 'Product 5');
    for (const [id, reader, table] of [
      [pgId, readers[0], 'products'],
      [myId, readers[1], 'gone_products'],
    ] as const) {
      await expectProductsEqualToApi(id, owner, reader);
      expect((await reader.rows('products')).map((row) => [String(row.id), row.title]).sort()).toEqual(
        [1, 2, 3, 4, 5].map((n) => [String(n), `Product ${n}`]),
      );
      await expectRecreated(id, [[table, 4]], 'change log');
      const named = await verify([id, '--json']);
      expect([named.code, JSON.parse(named.stdout).data.equal]).toEqual([0, true]);
    }
    // The staging table MySQL re-fills under was renamed to the table's name.
    const [staging] = await myTarget.admin.query(
      "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'menu\\_sync\\_refill\\_%'",
    );
    expect(staging).toEqual([]);
  }, 120_000);

  it('relational layout: a type’s table dropped by hand is re-created and re-filled from the change log, its child rows with it; a child table dropped alone is re-filled from each row’s resource', async () => {
    const { app, pgTarget, myTarget } = world;
    const owner = `gone-rel-${randomUUID().slice(0, 6)}`;
    const [pgId, myId] = await createSinks(owner, 'gone_rel', ['product'], 'relational');
    const readers = [postgresReader(pgTarget, 'gone_rel'), mysqlReader(myTarget, 'gone_rel_')];
    await deliverProducts(owner, [1, 2, 3, 4], (id) => `Product ${id}`);
    await expectProductsEqualToApi(pgId, owner, readers[0], 'relational');
    await expectProductsEqualToApi(myId, owner, readers[1], 'relational');

    await pgTarget.admin.query('DROP TABLE gone_rel.products');
    await myTarget.admin.query('DROP TABLE `gone_rel_products`');
    await deliverProducts(owner, [5], () => 'Product 5');
    for (const [id, reader, prefix] of [
      [pgId, readers[0], ''],
      [myId, readers[1], 'gone_rel_'],
    ] as const) {
      await expectProductsEqualToApi(id, owner, reader, 'relational');
      await expectRecreated(id, [[`${prefix}products`, 4]], 'change log');
    }

    await pgTarget.admin.query('DROP TABLE gone_rel.product_prices');
    await myTarget.admin.query('DROP TABLE `gone_rel_product_prices`');
    await deliverProducts(owner, [6], () => 'Product 6');
    for (const [id, reader, prefix] of [
      [pgId, readers[0], ''],
      [myId, readers[1], 'gone_rel_'],
    ] as const) {
      await expectProductsEqualToApi(id, owner, reader, 'relational');
      expect((await reader.rows('product_prices')).map((row) => String(row.product_id)).sort()).toEqual([
        '1',
        '2',
        '3',
        '4',
        '5',
        '6',
      ]);
      await expectRecreated(id, [[`${prefix}product_prices`, 5]], `the resource of each ${prefix}products row`);
      const named = await verify([id, '--json']);
      expect([named.code, JSON.parse(named.stdout).data.equal]).toEqual([0, true]);
      expect((await api(app.url, `/api/v1/sinks/${id}`, API_TOKEN)).json.data).toMatchObject({
        state: 'active',
        lag: 0,
      });
    }
  }, 180_000);
});

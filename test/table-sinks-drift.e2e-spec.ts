import { randomUUID } from 'node:crypto';
import { DaemonProcess } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, LOOPBACK_NETWORKS, RunningDaemon, startDaemon } from './support/http.js';
import { createMysqlTarget, MysqlTarget } from './support/mariadb.js';
import { createPostgresTarget, PostgresTarget } from './support/postgres-target.js';
import { settledSink } from './support/sink-receiver.js';
import { driftHelpers } from './support/table-sink-drift.js';
import { mysqlReader, postgresReader } from './support/table-sink-scenarios.js';

type Json = any;

describe('table sinks whose tables lost a column or a table by hand: re-added and re-filled, or failing (docs/reference.md §12)', () => {
  let app: RunningDaemon;
  let pgTarget: PostgresTarget;
  let myTarget: MysqlTarget;
  const { createSinks, deliverProducts, expectProductsEqualToApi, attempts, verify } = driftHelpers(() => ({
    app,
    pgTarget,
    myTarget,
  }));

  beforeAll(async () => {
    [pgTarget, myTarget] = await Promise.all([createPostgresTarget(), createMysqlTarget()]);
    app = await startDaemon({ SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS, SINK_FAILING_AFTER: '2s' });
  });

  afterAll(async () => {
    await DaemonProcess.killAll();
    await app?.close();
    await pgTarget?.drop();
    await myTarget?.drop();
  });

  it('a column dropped by hand: the write fails with the database’s error, then the sink re-adds the column, re-fills every row from its resource and says so; the table ends equal to the API', async () => {
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

  it('a table dropped by hand: the next batch re-creates it with its own rows only; sinks verify names the rest missing, --repair re-fills it', async () => {
    const owner = `gone-${randomUUID().slice(0, 6)}`;
    const [pgId, myId] = await createSinks(owner, 'gone');
    const readers = [postgresReader(pgTarget, 'gone'), mysqlReader(myTarget, 'gone_')];
    await deliverProducts(owner, [1, 2, 3, 4], (id) => `Product ${id}`);
    await expectProductsEqualToApi(pgId, owner, readers[0]);
    await expectProductsEqualToApi(myId, owner, readers[1]);
    await pgTarget.admin.query('DROP TABLE gone.products');
    await myTarget.admin.query('DROP TABLE `gone_products`');
    await deliverProducts(owner, [5], () => 'Product 5');
    const key = (id: string) => ({ owner_id: owner, id });
    for (const [id, reader] of [
      [pgId, readers[0]],
      [myId, readers[1]],
    ] as const) {
      await eventually(async () => expect((await reader.rows('products')).map((row) => row.id)).toEqual(['5']), 30_000);
      const named = await verify([id, '--json']);
      expect(named.code).toBe(1);
      expect((JSON.parse(named.stdout) as Json).data.types[0]).toMatchObject({
        api: { rows: 5 },
        target: { rows: 1 },
        missing: [key('1'), key('2'), key('3'), key('4')],
        extra: [],
        changed: [],
      });
      expect((await verify([id, '--repair'])).code).toBe(0);
      await expectProductsEqualToApi(id, owner, reader);
    }
  }, 120_000);
});

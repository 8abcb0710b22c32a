import { randomUUID } from 'node:crypto';
import { eventually } from './support/eventually.js';
import { deliver } from './support/http.js';
import { at, collection, menuEvent } from './support/menu-events.js';
import { expectRelationalMatches } from './support/relational-tables.js';
import { useDriftWorld } from './support/table-sink-drift.js';
import { apiResources, mysqlReader, postgresReader, postJson, TableReader } from './support/table-sink-scenarios.js';

type Json = any;

describe("menu-sync sinks verify: a table sink's tables compared with the API, and repaired (docs/reference.md §12)", () => {
  const { world, createSinks, deliverProducts, expectProductsEqualToApi, verify } = useDriftWorld();

  it('a table truncated, a row added and a row edited by hand: sinks verify names them (exit 1), --repair makes the tables equal to the API (exit 0)', async () => {
    const { app, pgTarget, myTarget } = world;
    const owner = `edited-${randomUUID().slice(0, 6)}`;
    const [pgId, myId] = await createSinks(owner, 'edited', ['product', 'collection']);
    await deliverProducts(owner, [1, 2, 3], (id) => `Product ${id}`);
    const menu = menuEvent('created', collection('7', { productIds: ['1', '2', '3'] }), { at: at(5), ownerId: owner });
    expect([200, 202]).toContain((await deliver(app.url, menu)).status);
    const readers = [postgresReader(pgTarget, 'edited'), mysqlReader(myTarget, 'edited_')];
    await expectProductsEqualToApi(pgId, owner, readers[0]);
    await expectProductsEqualToApi(myId, owner, readers[1]);
    await eventually(async () => {
      const [collections] = await myTarget.admin.query('SELECT id FROM `edited_collections`');
      expect(
        (await pgTarget.admin.query('SELECT id FROM edited.collections')).rows.length + (collections as Json[]).length,
      ).toBe(2);
    });

    for (const id of [pgId, myId]) {
      const equal = await verify([id, '--json']);
      expect([equal.code, JSON.parse(equal.stdout).data.equal]).toEqual([0, true]);
    }

    await pgTarget.admin.query('TRUNCATE edited.products');
    await pgTarget.admin.query(
      `INSERT INTO edited.products (owner_id, id, title, resource, seq) VALUES ($1, '99', 'by hand', '{}', 1)`,
      [owner],
    );
    await pgTarget.admin.query(`UPDATE edited.collections SET title = 'edited by hand' WHERE id = '7'`);
    await myTarget.admin.query('TRUNCATE `edited_products`');
    await myTarget.admin.query(
      "INSERT INTO `edited_products` (owner_id, id, title, resource, seq) VALUES (?, '99', 'by hand', '{}', 1)",
      [owner],
    );
    await myTarget.admin.query("UPDATE `edited_collections` SET title = 'edited by hand' WHERE id = '7'");

    const key = (id: string) => ({ owner_id: owner, id });
    for (const [id, kind] of [
      [pgId, 'postgres'],
      [myId, 'mysql'],
    ] as const) {
      const named = await verify([id, '--json']);
      expect(named.code).toBe(1);
      const report = JSON.parse(named.stdout) as Json;
      expect(report.repaired).toBeNull();
      expect(report.data).toMatchObject({ sink_id: id, kind, equal: false });
      const [products, collections] = report.data.types as Json[];
      expect(products).toMatchObject({
        type: 'product',
        api: { rows: 3 },
        target: { rows: 1 },
        equal: false,
        missing: [key('1'), key('2'), key('3')],
        extra: [key('99')],
        changed: [],
      });
      expect(collections).toMatchObject({
        type: 'collection',
        api: { rows: 1 },
        target: { rows: 1 },
        equal: false,
        missing: [],
        extra: [],
        changed: [key('7')],
      });
      expect(collections.api.digest).not.toBe(collections.target.digest);

      const text = await verify([id.slice(0, 13)]);
      expect(text.code).toBe(1);
      expect(text.stdout).toContain(`differs from the API`);
      expect(text.stdout).toContain(
        `products: missing ${owner}/1, ${owner}/2, ${owner}/3; changed -; extra ${owner}/99\n`,
      );
      expect(text.stdout).toMatch(/^collection +(edited_)?collections +1 +[0-9a-f]{16} +1 +[0-9a-f]{16} +differs$/m);

      const repaired = await verify([id, '--repair', '--json']);
      expect(repaired.code).toBe(0);
      const answer = JSON.parse(repaired.stdout) as Json;
      expect([answer.data.equal, answer.repaired.equal]).toEqual([false, true]);
      expect(answer.repaired.types.map((type: Json) => [type.api, type.target])).toEqual(
        answer.repaired.types.map((type: Json) => [type.api, type.api]),
      );
      expect((await verify([id])).code).toBe(0);
    }
    for (const [id, reader] of [
      [pgId, readers[0]],
      [myId, readers[1]],
    ] as const)
      await expectProductsEqualToApi(id, owner, reader);
    const [myCollections] = await myTarget.admin.query('SELECT title FROM `edited_collections`');
    expect([(await pgTarget.admin.query('SELECT title FROM edited.collections')).rows, myCollections]).toEqual([
      [{ title: 'Collection 7' }],
      [{ title: 'Collection 7' }],
    ]);
  }, 180_000);

  it('relational layout: a table truncated, a price edited and a link deleted by hand: sinks verify names them per table, --repair makes them equal to the API', async () => {
    const { app, pgTarget, myTarget } = world;
    const owner = `edited-rel-${randomUUID().slice(0, 6)}`;
    const [pgId, myId] = await createSinks(owner, 'edited_rel', ['product', 'collection'], 'relational');
    await deliverProducts(owner, [1, 2, 3], (id) => `Product ${id}`);
    const menu = menuEvent('created', collection('7', { productIds: ['1', '2', '3'] }), { at: at(5), ownerId: owner });
    expect([200, 202]).toContain((await deliver(app.url, menu)).status);
    const readers = [postgresReader(pgTarget, 'edited_rel'), mysqlReader(myTarget, 'edited_rel_')];
    const collectionsEqual = async (reader: TableReader) =>
      expectRelationalMatches(
        (table) => reader.rows(table),
        'collection',
        owner,
        await apiResources(app, owner, 'collection'),
      );
    for (const [id, reader] of [
      [pgId, readers[0]],
      [myId, readers[1]],
    ] as const) {
      await expectProductsEqualToApi(id, owner, reader, 'relational');
      await eventually(() => collectionsEqual(reader), 30_000);
      const equal = await verify([id, '--json']);
      expect([equal.code, JSON.parse(equal.stdout).data.equal]).toEqual([0, true]);
    }

    await pgTarget.admin.query('TRUNCATE edited_rel.products');
    await pgTarget.admin.query(`UPDATE edited_rel.product_prices SET cents = 1 WHERE product_id = 2`);
    await pgTarget.admin.query(`DELETE FROM edited_rel.collection_products WHERE product_id = 3`);
    await myTarget.admin.query('TRUNCATE `edited_rel_products`');
    await myTarget.admin.query('UPDATE `edited_rel_product_prices` SET cents = 1 WHERE product_id = 2');
    await myTarget.admin.query('DELETE FROM `edited_rel_collection_products` WHERE product_id = 3');

    const key = (id: string) => ({ owner_id: owner, id });
    for (const [id, prefix, reader] of [
      [pgId, '', readers[0]],
      [myId, 'edited_rel_', readers[1]],
    ] as const) {
      const named = await verify([id, '--json']);
      expect(named.code).toBe(1);
      const types = (JSON.parse(named.stdout) as Json).data.types as Json[];
      const differing = types
        .filter((type) => !type.equal)
        .map((type) => [type.table, type.missing, type.changed, type.extra]);
      expect(differing).toEqual([
        [`${prefix}products`, [key('1'), key('2'), key('3')], [], []],
        [`${prefix}product_prices`, [], [key('2/GBP')], []],
        [`${prefix}collection_products`, [key('7/3')], [], []],
      ]);
      expect((await verify([id, '--repair'])).code).toBe(0);
      expect((await verify([id])).code).toBe(0);
      await expectProductsEqualToApi(id, owner, reader, 'relational');
      await collectionsEqual(reader);
    }
  }, 180_000);

  it('sinks verify: an unknown sink is 1, a sink that writes no tables 2, without the id 2', async () => {
    const { app } = world;
    const http = await postJson(app, '/api/v1/sinks', {
      kind: 'http',
      url: 'http://127.0.0.1:9/x',
      owner_ids: ['nobody'],
    });
    expect(http.status).toBe(201);
    const unknown = await verify(['00000000-0000-4000-8000-000000000000']);
    expect([unknown.code, unknown.stderr]).toEqual([
      1,
      'menu-sync sinks verify: No sink 00000000-0000-4000-8000-000000000000.\n',
    ]);
    const notTables = await verify([http.json.data.id]);
    expect([notTables.code, notTables.stderr]).toEqual([
      2,
      `menu-sync sinks verify: sinks verify compares a table sink's tables; ${http.json.data.id} is a http sink\n`,
    ]);
    expect((await verify([])).code).toBe(2);
  }, 120_000);
});

import { randomUUID } from 'node:crypto';
import type { TableLayout } from '../../src/sinks/sink.js';
import { insertChanges, sqlQuery } from './change-log-factory.js';
import { DaemonProcess } from './daemon-process.js';
import { eventually } from './eventually.js';
import { api, API_TOKEN, deliver, RunningDaemon } from './http.js';
import { mysqlColumns, MysqlTarget } from './mariadb.js';
import {
  at,
  collection,
  destroyedEvent,
  menuEvent,
  moneyMap,
  order,
  orderEvent,
  orderProduct,
  product,
  store,
  trait,
  traitOption,
  user,
} from './menu-events.js';
import { postgresColumns, PostgresTarget } from './postgres-target.js';
import { expectRelationalMatches } from './relational-tables.js';
import { settledSink } from './sink-receiver.js';
import { expectRowMatches, json, TABLE_TYPES } from './table-sinks.js';

type Json = any;

/** The daemon and the two target databases a table-sink e2e file runs its scenarios against. */
export interface TableSinkWorld {
  app: RunningDaemon;
  pgTarget: PostgresTarget;
  myTarget: MysqlTarget;
}

/** How a test reads one sink's tables: a table (the API's plural type, or a child table) by its unprefixed name. */
export interface TableReader {
  rows(table: string): Promise<Json[]>;
  columns(table: string): Promise<string[]>;
}

export const postgresReader = (target: PostgresTarget, schema: string): TableReader => ({
  rows: async (table) => (await target.admin.query(`SELECT * FROM "${schema}"."${table}"`)).rows,
  columns: (table) => postgresColumns(target, schema, table),
});

export const mysqlReader = (target: MysqlTarget, prefix: string): TableReader => ({
  rows: async (table) => (await target.admin.query(`SELECT * FROM \`${prefix}${table}\``))[0] as Json[],
  columns: (table) => mysqlColumns(target, `${prefix}${table}`),
});

export const postJson = (app: RunningDaemon, path: string, body: unknown) =>
  api(app.url, path, API_TOKEN, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

/**
 * Events of one owner (ids offset by `base`, so owners never share an id): a menu with orders,
 * updates, destroys, a duplicate delivery and an update older than the one already applied.
 */
export function ownerEvents(ownerId: string, base: number): Json[] {
  let minute = 0;
  const meta = () => ({ at: at(minute++), ownerId });
  const id = (n: number) => String(base + n);
  const events: Json[] = [
    menuEvent('created', product(id(10), { traitIds: [id(20)] }), meta()),
    menuEvent('created', product(id(11), { cents: 1200 }), meta()),
    menuEvent('created', product(id(12)), meta()),
    menuEvent('created', trait(id(20), { optionIds: [id(30), id(31)] }), meta()),
    menuEvent('created', traitOption(id(30), { traitId: id(20), isDefault: true }), meta()),
    menuEvent('created', traitOption(id(31), { traitId: id(20) }), meta()),
    menuEvent('created', collection(id(1), { productIds: [id(10), id(11), id(12)] }), meta()),
  ];
  const parts = (status: string) => ({
    user: user(id(9)),
    order: order(id(40), { orderProductIds: [id(41)], storeId: id(50), userId: id(9), status, note: `for ${ownerId}` }),
    orderProducts: [orderProduct(id(41), { productId: id(10), quantity: 2 })],
    store: store(id(50), { title: `Store of ${ownerId}` }),
  });
  events.push(orderEvent('created', parts('pending'), meta()));
  const renamed = menuEvent('updated', product(id(10), { title: 'Renamed', traitIds: [id(20)] }), meta());
  events.push(renamed, renamed);
  const stale = menuEvent('updated', product(id(11), { title: 'Stale' }), { at: at(-5), ownerId });
  events.push(menuEvent('updated', product(id(11), { title: 'Newest', available: false }), meta()), stale);
  events.push(destroyedEvent('product', id(12), meta()), destroyedEvent('trait_option', id(31), meta()));
  events.push(menuEvent('updated', collection(id(1), { productIds: [id(11), id(10)] }), meta()));
  events.push(orderEvent('updated', parts('accepted'), meta()));
  return events;
}

/** The API's live resources of one owner and type. */
export async function apiResources(app: RunningDaemon, ownerId: string, type: string): Promise<Json[]> {
  const answer = await api(app.url, `/api/v1/${TABLE_TYPES[type]}?owner_id=${ownerId}&limit=1000`);
  expect(answer.status).toBe(200);
  return answer.json.data;
}

/** Waits until the sink has delivered every change, then compares each of its tables with the API, owner by owner. */
export async function expectEqualToApi(
  app: RunningDaemon,
  sinkId: string,
  owners: string[],
  layout: TableLayout,
  reader: TableReader,
): Promise<void> {
  await eventually(
    async () => {
      const projections = (await api(app.url, '/api/v1/projections')).json.data;
      expect(projections.every((projection: Json) => projection.lag === 0)).toBe(true);
      const sink = (await api(app.url, `/api/v1/sinks/${sinkId}`)).json.data;
      expect([sink.lag, sink.state, sink.last_error]).toEqual([0, 'active', null]);
    },
    60_000,
    100,
  );
  for (const [type, table] of Object.entries(TABLE_TYPES)) {
    const columns = await reader.columns(table);
    const rows = await reader.rows(table);
    for (const ownerId of owners) {
      const expected = await apiResources(app, ownerId, type);
      if (layout === 'relational') {
        await expectRelationalMatches(
          (name) => (name === table ? Promise.resolve(rows) : reader.rows(name)),
          type,
          ownerId,
          expected,
        );
        continue;
      }
      const mine = rows.filter((row) => row.owner_id === ownerId);
      expect(mine.map((row) => String(row.id)).sort()).toEqual(expected.map((resource) => resource.id).sort());
      const byId = new Map(mine.map((row) => [String(row.id), row]));
      for (const resource of expected) expectRowMatches(byId.get(resource.id), resource, columns);
    }
  }
}

/**
 * Several owners' events (creates, updates, destroys, a duplicate, an older update after a newer
 * one) into a PostgreSQL schema and MySQL tables of `layout`: both equal to the API, owner by
 * owner, and the URL's password nowhere in clear.
 */
export async function keepsTablesEqualToApi(world: TableSinkWorld, layout: TableLayout): Promise<void> {
  const { app, pgTarget, myTarget } = world;
  const owners = ['a', 'b', 'c'].map((name) => `tables-${name}-${randomUUID().slice(0, 6)}`);
  const pgSink = await postJson(app, '/api/v1/sinks', {
    kind: 'postgres',
    url: pgTarget.url,
    schema: 'catalogue',
    batch_size: 7,
    layout,
  });
  expect(pgSink.status).toBe(201);
  expect(pgSink.json.data).toMatchObject({
    kind: 'postgres',
    url: `postgres://${pgTarget.role}:***@127.0.0.1:5432/${pgTarget.database}`,
    schema: 'catalogue',
    batch_size: 7,
    layout,
  });
  expect(pgSink.json.data.secret).toBeUndefined();
  const mySink = await postJson(app, '/api/v1/sinks', {
    kind: 'mysql',
    url: myTarget.url,
    table_prefix: 'shop_',
    batch_size: 5,
    ...(layout === 'document' ? {} : { layout }),
  });
  expect(mySink.status).toBe(201);
  expect(mySink.json.data).toMatchObject({
    kind: 'mysql',
    url: `mysql://${myTarget.user}:***@127.0.0.1:3306/${myTarget.database}`,
    table_prefix: 'shop_',
    layout,
  });

  for (const [index, ownerId] of owners.entries()) {
    for (const event of ownerEvents(ownerId, (index + 1) * 1000)) {
      const answer = await deliver(app.url, event);
      expect([200, 202]).toContain(answer.status);
    }
  }

  await expectEqualToApi(app, pgSink.json.data.id, owners, layout, postgresReader(pgTarget, 'catalogue'));
  await expectEqualToApi(app, mySink.json.data.id, owners, layout, mysqlReader(myTarget, 'shop_'));
  await (layout === 'document' ? spellOutDocument : spellOutRelational)(world, owners);

  // The URL's password: never in an answer, nor in clear in the daemon's database, nor in its logs.
  const ids = [pgSink.json.data.id, mySink.json.data.id];
  const listed = await api(app.url, '/api/v1/sinks');
  expect(listed.json.data.filter((sink: Json) => ids.includes(sink.id)).map((sink: Json) => sink.url)).toEqual([
    pgSink.json.data.url,
    mySink.json.data.url,
  ]);
  const stored = await sqlQuery(
    app.database.url,
    `SELECT url, url_sealed, schema, table_prefix, layout FROM sinks WHERE id = ANY($1::uuid[]) ORDER BY created_at`,
    [ids],
  );
  expect(stored.map((row) => [row.url, row.schema, row.table_prefix, row.layout])).toEqual([
    [pgSink.json.data.url, 'catalogue', null, layout],
    [mySink.json.data.url, null, 'shop_', layout],
  ]);
  for (const [row, password] of [
    [stored[0], pgTarget.password],
    [stored[1], myTarget.password],
  ] as const) {
    expect(row.url_sealed.includes(Buffer.from(password))).toBe(false);
    expect(row.url_sealed.includes(Buffer.from(encodeURIComponent(password)))).toBe(false);
    expect(listed.text).not.toContain(encodeURIComponent(password));
    expect(app.process.logs).not.toContain(encodeURIComponent(password));
    expect(app.process.logs).not.toContain(password);
  }
}

/** What the document tables hold, spelled out for one owner each. */
async function spellOutDocument({ pgTarget, myTarget }: TableSinkWorld, owners: string[]): Promise<void> {
  const products = await pgTarget.admin.query(
    `SELECT id, title, available, traits_ids FROM catalogue.products WHERE owner_id = $1 ORDER BY id`,
    [owners[0]],
  );
  expect(products.rows).toEqual([
    { id: '1010', title: 'Renamed', available: true, traits_ids: ['1020'] },
    { id: '1011', title: 'Newest', available: false, traits_ids: [] },
  ]);
  const [orders] = await myTarget.admin.query(
    `SELECT id, status, note, store_ids FROM shop_orders WHERE owner_id = ?`,
    [owners[1]],
  );
  expect((orders as Json[]).map((row) => ({ ...row, store_ids: json(row.store_ids) }))).toEqual([
    { id: '2040', status: 'accepted', note: `for ${owners[1]}`, store_ids: ['2050'] },
  ]);
  const collections = await pgTarget.admin.query(`SELECT products_ids FROM catalogue.collections WHERE owner_id = $1`, [
    owners[2],
  ]);
  expect(collections.rows).toEqual([{ products_ids: ['3011', '3010'] }]);
}

/** What the relational tables hold, spelled out for one owner each. */
async function spellOutRelational({ pgTarget, myTarget }: TableSinkWorld, owners: string[]): Promise<void> {
  const products = await pgTarget.admin.query(
    `SELECT p.id::int, p.title, p.available, t.trait_id::int, c.cents::int FROM catalogue.products p
       LEFT JOIN catalogue.product_traits t ON t.owner_id = p.owner_id AND t.product_id = p.id
       LEFT JOIN catalogue.product_prices c ON c.owner_id = p.owner_id AND c.product_id = p.id AND c.currency = 'GBP'
      WHERE p.owner_id = $1 ORDER BY p.id`,
    [owners[0]],
  );
  expect(products.rows).toEqual([
    { id: 1010, title: 'Renamed', available: true, trait_id: 1020, cents: 850 },
    { id: 1011, title: 'Newest', available: false, trait_id: null, cents: 850 },
  ]);
  const [orders] = await myTarget.admin.query(
    `SELECT id, status, note, store_id, user_id FROM shop_orders WHERE owner_id = ?`,
    [owners[1]],
  );
  expect(orders).toEqual([{ id: 2040, status: 'accepted', note: `for ${owners[1]}`, store_id: 2050, user_id: '2009' }]);
  const [links] = await myTarget.admin.query(
    `SELECT product_id, position FROM shop_collection_products WHERE owner_id = ? ORDER BY position`,
    [owners[2]],
  );
  expect(links).toEqual([
    { product_id: 3011, position: 0 },
    { product_id: 3010, position: 1 },
  ]);
}

/**
 * A SIGKILL of the daemon during a 3,000-change backlog of products (each with a GBP price): after a
 * restart both targets equal the newest changes (and, relational, the newest prices), none applied
 * twice. Answers the daemon started again.
 */
export async function survivesSigkill(world: TableSinkWorld, layout: TableLayout): Promise<DaemonProcess> {
  const { app, pgTarget, myTarget } = world;
  const owner = `durable-${randomUUID().slice(0, 6)}`;
  const place = layout === 'document' ? 'durable' : 'durable_rel';
  const common = { owner_ids: [owner], types: ['product'], batch_size: 20, layout };
  const pgSink = await postJson(app, '/api/v1/sinks', {
    kind: 'postgres',
    url: pgTarget.url,
    schema: place,
    ...common,
  });
  const mySink = await postJson(app, '/api/v1/sinks', {
    kind: 'mysql',
    url: myTarget.url,
    table_prefix: `${place}_`,
    ...common,
  });
  const settled = (baseUrl: string) =>
    Promise.all(
      [pgSink, mySink].map((sink) => settledSink(baseUrl, sink.json.data.id, { lag: 0, state: 'active' }, 120_000)),
    );
  // The sinks make their tables with the first change; then triggers count every write per (id, seq).
  await insertChanges(app.database.url, [{ type: 'product', id: '100000', ownerId: owner }]);
  await settled(app.url);
  await pgTarget.admin.query(`
    CREATE TABLE ${place}.applications (id text, seq bigint, n integer NOT NULL DEFAULT 1, PRIMARY KEY (id, seq));
    CREATE FUNCTION ${place}.count_application() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO ${place}.applications (id, seq) VALUES (NEW.id, NEW.seq)
          ON CONFLICT (id, seq) DO UPDATE SET n = ${place}.applications.n + 1;
        RETURN NEW;
      END $$;
    CREATE TRIGGER count_application AFTER INSERT OR UPDATE ON ${place}.products
      FOR EACH ROW EXECUTE FUNCTION ${place}.count_application();
    GRANT ALL ON ${place}.applications TO ${pgTarget.role};`);
  await myTarget.admin.query(
    `CREATE TABLE ${place}_applications (id VARCHAR(255), seq BIGINT, n INT NOT NULL DEFAULT 1, PRIMARY KEY (id, seq))`,
  );
  for (const event of ['INSERT', 'UPDATE'])
    await myTarget.admin.query(
      `CREATE TRIGGER ${place}_count_${event.toLowerCase()} AFTER ${event} ON ${place}_products FOR EACH ROW
         INSERT INTO ${place}_applications (id, seq) VALUES (NEW.id, NEW.seq) ON DUPLICATE KEY UPDATE n = n + 1`,
    );

  const inputs = [];
  for (let round = 0; round < 3; round++)
    for (let n = 0; n < 1000; n++)
      inputs.push({
        type: 'product',
        id: String(n + 1),
        ownerId: owner,
        op: round === 2 && n % 10 === 0 ? ('delete' as const) : ('upsert' as const),
        attributes: { title: `round ${round} of ${n}`, available: n % 2 === 0, base_cost: moneyMap(round * 1000 + n) },
      });
  await insertChanges(app.database.url, inputs);
  await eventually(
    async () => {
      const { rows } = await pgTarget.admin.query(`SELECT count(*)::int AS n FROM ${place}.applications`);
      expect(rows[0].n).toBeGreaterThanOrEqual(300);
    },
    60_000,
    5,
  );
  app.process.kill('SIGKILL');
  await app.process.waitForExit(10_000);
  const { rows: applied } = await pgTarget.admin.query(`SELECT count(*)::int AS n FROM ${place}.applications`);
  expect(applied[0].n).toBeLessThan(2000);
  const { PORT: _port, ...env } = app.process.env;
  const restarted = await DaemonProcess.start({ cwd: app.process.cwd, env });
  await settled(restarted.url);

  const changes = await sqlQuery(
    app.database.url,
    `SELECT DISTINCT ON (id) id, op, seq::int AS seq, resource FROM change_log WHERE owner_id = $1 ORDER BY id, seq DESC`,
    [owner],
  );
  const live = changes.filter((change) => change.op === 'upsert');
  expect(live.length).toBe(901);
  const expected = live.map((change) => [change.id, change.seq, change.resource]).sort();
  const pgRows = await pgTarget.admin.query(`SELECT id, seq::int AS seq, resource FROM ${place}.products`);
  expect(pgRows.rows.map((row) => [String(row.id), row.seq, row.resource]).sort()).toEqual(expected);
  const [myRows] = await myTarget.admin.query(`SELECT id, seq, resource FROM ${place}_products`);
  expect((myRows as Json[]).map((row) => [String(row.id), Number(row.seq), json(row.resource)]).sort()).toEqual(
    expected,
  );
  if (layout === 'relational') {
    const prices = live
      .filter((change) => change.resource.attributes.base_cost !== undefined)
      .map((change) => [change.id, change.resource.attributes.base_cost.GBP.cents])
      .sort();
    const pgPrices = await pgTarget.admin.query(`SELECT product_id, cents FROM ${place}.product_prices`);
    expect(pgPrices.rows.map((row) => [String(row.product_id), Number(row.cents)]).sort()).toEqual(prices);
    const [myPrices] = await myTarget.admin.query(`SELECT product_id, cents FROM ${place}_product_prices`);
    expect((myPrices as Json[]).map((row) => [String(row.product_id), Number(row.cents)]).sort()).toEqual(prices);
  }
  const twice = await pgTarget.admin.query(`SELECT id, seq, n FROM ${place}.applications WHERE n > 1`);
  expect(twice.rows).toEqual([]);
  const [myTwice] = await myTarget.admin.query(`SELECT id, seq, n FROM ${place}_applications WHERE n > 1`);
  expect(myTwice).toEqual([]);
  // No batch holds two changes of one product (each is changed every 1,000 changes): every upsert
  // of the backlog (2,900; the first change came before the triggers) was written exactly once (MySQL counts a resent row too: its
  // ON DUPLICATE KEY UPDATE fires the update trigger even when the seq guard keeps the row).
  const { rows: total } = await pgTarget.admin.query(`SELECT count(*)::int AS n FROM ${place}.applications`);
  expect(total[0].n).toBe(2900);
  const [myTotal] = await myTarget.admin.query(`SELECT count(*) AS n FROM ${place}_applications`);
  expect(Number((myTotal as Json[])[0].n)).toBe(2900);
  return restarted;
}

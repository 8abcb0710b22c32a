import { randomUUID } from 'node:crypto';
import { insertChanges } from './support/change-log-factory.js';
import { DaemonProcess } from './support/daemon-process.js';
import { api, API_TOKEN, deliver, RunningDaemon, startDaemon } from './support/http.js';
import { createMysqlTarget, MysqlTarget } from './support/mariadb.js';
import { at, collection, destroyedEvent, menuEvent, moneyMap, product } from './support/menu-events.js';
import { createPostgresTarget, PostgresTarget } from './support/postgres-target.js';
import { settledSink } from './support/sink-receiver.js';
import {
  apiResources,
  keepsTablesEqualToApi,
  postJson,
  survivesSigkill,
  TableSinkWorld,
} from './support/table-sink-scenarios.js';
import { ALL_TYPES } from './support/table-sinks.js';

type Json = any;

const patch = (app: RunningDaemon, id: string, body: unknown) =>
  api(app.url, `/api/v1/sinks/${id}`, API_TOKEN, {
    method: 'PATCH',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('table sinks in the relational layout (docs/reference.md §12, "Relational layout")', () => {
  let app: RunningDaemon;
  let pgTarget: PostgresTarget;
  let myTarget: MysqlTarget;
  const world = (): TableSinkWorld => ({ app, pgTarget, myTarget });

  beforeAll(async () => {
    [pgTarget, myTarget] = await Promise.all([createPostgresTarget(), createMysqlTarget()]);
    app = await startDaemon({
      SINK_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128',
      CHANGES_TYPES: ALL_TYPES.join(','),
      SINK_FAILING_AFTER: '2s',
    });
  });

  afterAll(async () => {
    await DaemonProcess.killAll();
    await app?.close();
    await pgTarget?.drop();
    await myTarget?.drop();
  });

  it('layout: taken by table sinks at creation and shown; refused for other kinds, other values and on PATCH, naming it', async () => {
    for (const [body, field, detail] of [
      [
        { kind: 'http', url: 'https://example.com/hook', layout: 'relational' },
        'layout',
        'layout is only for postgres and mysql sinks',
      ],
      [{ kind: 'nats', layout: 'document' }, 'layout', 'layout is only for postgres and mysql sinks'],
      [
        { kind: 'postgres', url: pgTarget.url, layout: 'graph' },
        'layout',
        'layout must be one of document, relational',
      ],
      [{ kind: 'mysql', url: myTarget.url, layout: null }, 'layout', 'layout must be one of document, relational'],
      [
        { kind: 'mysql', url: myTarget.url, layout: 'relational', table_prefix: 'a_prefix_of_24_letters__' },
        'table_prefix',
        'table_prefix may have at most 23 characters with the relational layout (MySQL names have at most 64)',
      ],
    ] as const) {
      const answer = await postJson(app, '/api/v1/sinks', body);
      expect([answer.status, answer.json.field, answer.json.detail]).toEqual([400, field, detail]);
      expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    }
    expect((await api(app.url, '/api/v1/sinks')).json.data).toEqual([]);

    const created = await postJson(app, '/api/v1/sinks', {
      kind: 'mysql',
      url: myTarget.url,
      layout: 'relational',
      table_prefix: 'a_prefix_of_23_letters_',
      owner_ids: ['nobody'],
    });
    expect([created.status, created.json.data.layout]).toEqual([201, 'relational']);
    const id = created.json.data.id;
    for (const layout of ['document', 'relational', null]) {
      const answer = await patch(app, id, { layout });
      expect([answer.status, answer.json.field, answer.json.detail]).toEqual([
        400,
        'layout',
        'layout is fixed at creation: create another sink with the layout wanted',
      ]);
    }
    expect((await api(app.url, `/api/v1/sinks/${id}`)).json.data.layout).toBe('relational');
    expect((await api(app.url, '/api/v1/sinks')).json.data.map((sink: Json) => sink.layout)).toEqual(['relational']);
    const http = await postJson(app, '/api/v1/sinks', { kind: 'http', url: 'https://example.com/hook' });
    expect(http.json.data.layout).toBeUndefined();
    for (const sink of [id, http.json.data.id])
      expect((await api(app.url, `/api/v1/sinks/${sink}`, API_TOKEN, { method: 'DELETE' })).status).toBe(204);
  });

  it('keeps a PostgreSQL schema and MySQL tables equal to the API across owners, updates, destroys, duplicates and stale events', async () => {
    await keepsTablesEqualToApi(world(), 'relational');
  }, 240_000);

  it('answers "the available products of collection X with their GBP price, in the platform’s order" with a plain join, equal to the API', async () => {
    const owner = `catalogue-${randomUUID().slice(0, 6)}`;
    const common = { owner_ids: [owner], types: ['collection', 'product'], layout: 'relational' };
    const sinks = [
      await postJson(app, '/api/v1/sinks', { kind: 'postgres', url: pgTarget.url, schema: 'shelf', ...common }),
      await postJson(app, '/api/v1/sinks', { kind: 'mysql', url: myTarget.url, table_prefix: 'shelf_', ...common }),
    ];
    let minute = 0;
    const meta = () => ({ at: at(minute++), ownerId: owner });
    const priced = (id: string, options: { available?: boolean; gbp?: number; eur?: number }) => {
      const resource = product(id, { available: options.available ?? true, title: `Dish ${id}` });
      resource.attributes.base_cost = {
        ...(options.gbp === undefined ? {} : moneyMap(options.gbp)),
        ...(options.eur === undefined ? {} : moneyMap(options.eur, 'EUR')),
      };
      return resource;
    };
    for (const event of [
      menuEvent('created', priced('15', { gbp: 450 }), meta()),
      menuEvent('created', priced('3', { available: false, gbp: 300 }), meta()),
      menuEvent('created', priced('12', { gbp: 1200, eur: 1350 }), meta()),
      menuEvent('created', priced('7', { eur: 700 }), meta()),
      menuEvent('created', priced('9', { gbp: 900 }), meta()),
      menuEvent('created', priced('100', { gbp: 100 }), meta()),
      menuEvent('created', collection('900', { productIds: ['15', '3', '12', '7', '9', '100'] }), meta()),
      menuEvent('created', collection('901', { productIds: ['3', '15'] }), meta()),
      menuEvent('updated', priced('100', { gbp: 150 }), meta()),
      menuEvent('updated', priced('15', { available: false, gbp: 450 }), meta()),
      destroyedEvent('product', '9', meta()),
      menuEvent('updated', collection('900', { productIds: ['100', '12', '3', '15', '9', '7'] }), meta()),
    ])
      expect([200, 202]).toContain((await deliver(app.url, event)).status);
    for (const sink of sinks) await settledSink(app.url, sink.json.data.id, { lag: 0, state: 'active' }, 60_000);

    const [collectionX] = (await apiResources(app, owner, 'collection')).filter((found) => found.id === '900');
    const products = new Map((await apiResources(app, owner, 'product')).map((found) => [found.id, found]));
    const expected = collectionX.relationships.products.data
      .map((identifier: Json) => products.get(identifier.id))
      .filter((found: Json) => found?.attributes.available === true)
      .map((found: Json) => ({
        id: Number(found.id),
        title: found.attributes.title,
        cents: found.attributes.base_cost.GBP?.cents ?? null,
      }));
    expect(expected).toEqual([
      { id: 100, title: 'Dish 100', cents: 150 },
      { id: 12, title: 'Dish 12', cents: 1200 },
      { id: 7, title: 'Dish 7', cents: null },
    ]);
    const question = (t: (table: string) => string, owner: string) =>
      `SELECT p.id, p.title, pp.cents
         FROM ${t('collection_products')} cp
         JOIN ${t('products')} p ON p.owner_id = cp.owner_id AND p.id = cp.product_id
         LEFT JOIN ${t('product_prices')} pp ON pp.owner_id = p.owner_id AND pp.product_id = p.id AND pp.currency = 'GBP'
        WHERE cp.owner_id = '${owner}' AND cp.collection_id = 900 AND p.available
        ORDER BY cp.position`;
    const pg = await pgTarget.admin.query(question((table) => `shelf.${table}`, owner));
    expect(
      pg.rows.map((row) => ({ ...row, id: Number(row.id), cents: row.cents === null ? null : Number(row.cents) })),
    ).toEqual(expected);
    const [my] = await myTarget.admin.query(question((table) => `shelf_${table}`, owner));
    expect(my).toEqual(expected);
  }, 120_000);

  it('a change whose id is not an integer: the sink retries that batch naming the id, and writes nothing of it', async () => {
    const owner = `strings-${randomUUID().slice(0, 6)}`;
    const common = { owner_ids: [owner], types: ['product'], layout: 'relational' };
    const sinks = [
      await postJson(app, '/api/v1/sinks', { kind: 'postgres', url: pgTarget.url, schema: 'strings', ...common }),
      await postJson(app, '/api/v1/sinks', { kind: 'mysql', url: myTarget.url, table_prefix: 'strings_', ...common }),
    ];
    await insertChanges(app.database.url, [{ type: 'product', id: '1', ownerId: owner, attributes: { title: 'one' } }]);
    for (const sink of sinks) await settledSink(app.url, sink.json.data.id, { lag: 0, state: 'active' }, 30_000);
    await insertChanges(app.database.url, [
      { type: 'product', id: '2', ownerId: owner, attributes: { title: 'two' } },
      { type: 'product', id: 'sku-2', ownerId: owner, attributes: { title: 'text id' } },
    ]);
    const error = `the id "sku-2" of product (owner "${owner}") is not an integer (a decimal of at most 19 digits, no leading zero): the relational layout keeps it as a bigint, so the batch is not written`;
    for (const sink of sinks) {
      await settledSink(app.url, sink.json.data.id, { state: 'failing', lag: 2, last_error: error }, 30_000);
      const [newest] = (await api(app.url, `/api/v1/sinks/${sink.json.data.id}/attempts`)).json.data as Json[];
      expect(newest).toMatchObject({ outcome: 'retry', status: 0, error, batch: { changes: 2 } });
    }
    const { rows } = await pgTarget.admin.query(`SELECT id::int, title FROM strings.products`);
    expect(rows).toEqual([{ id: 1, title: 'one' }]);
    const [mine] = await myTarget.admin.query(`SELECT id, title FROM strings_products`);
    expect(mine).toEqual([{ id: 1, title: 'one' }]);
  }, 120_000);

  it('a SIGKILL of the daemon during a 3,000-change backlog: after a restart both targets equal the newest changes and prices, none applied twice', async () => {
    await survivesSigkill(world(), 'relational');
  }, 300_000);
});

import { createMysqlTarget, MysqlTarget } from '../../../test/support/mariadb.js';
import { useDatabase } from '../../../test/support/database.js';
import { collection, moneyMap, product, traitOption } from '../../../test/support/menu-events.js';
import { createPostgresTarget, PostgresTarget } from '../../../test/support/postgres-target.js';
import {
  after,
  ALL_TYPES,
  ChangeFactory,
  expectReplaysNeverMoveBack,
  json,
  sampleBatch,
  tableSink,
  tableSinksClient,
} from '../../../test/support/table-sinks.js';
import type { ChangeEntry } from '../../changes/change.js';
import type { Sink } from '../sink.js';
import { committedAnswer, countRows } from './table-batch.js';
import { relationalTables } from './relational-tables.js';

/** What applying `batch` answers once committed: the ok outcome with its row counts (table-batch's words). */
const committedOf = (batch: ChangeEntry[]) => ({
  kind: 'ok',
  ...committedAnswer(
    countRows(
      { upserts: 0, deletes: 0 },
      batch.map((entry) => entry.change),
    ),
  ),
});

type Json = any;

/** One target database as the tests read it: `t(table)` names a sink's table (its schema, or its prefix). */
interface Target {
  kind: 'postgres' | 'mysql';
  url: string;
  /** Rows of a statement, values as JSON would show them (ids and counts as numbers, MySQL's booleans as booleans). */
  query(sql: string): Promise<Json[]>;
  /** The type of each column of a table, lowercase, with its collation where it has one (MySQL). */
  columnTypes(table: string): Promise<Record<string, string>>;
  t(table: string, place: string): string;
  drop(): Promise<void>;
}

const plain = (row: Json): Json =>
  Object.fromEntries(
    Object.entries(row).map(([key, value]) => [
      key,
      typeof value === 'string' && /^-?\d+$/.test(value) && !key.endsWith('owner_id') ? Number(value) : value,
    ]),
  );

async function postgres(): Promise<Target> {
  const target: PostgresTarget = await createPostgresTarget();
  return {
    kind: 'postgres',
    url: target.url,
    query: async (sql) => (await target.admin.query(sql)).rows.map(plain),
    columnTypes: async (table) => {
      const [schema, name] = table.split('.');
      const { rows } = await target.admin.query(
        `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2`,
        [schema, name],
      );
      return Object.fromEntries(rows.map((row) => [row.column_name, row.data_type]));
    },
    t: (table, place) => `${place}.${table}`,
    drop: () => target.drop(),
  };
}

async function mysql(): Promise<Target> {
  const target: MysqlTarget = await createMysqlTarget();
  const booleans = new Set(['available', 'default_', 'required', 'allow_multiple']);
  return {
    kind: 'mysql',
    url: target.url,
    query: async (sql) =>
      [(await target.admin.query(sql))[0]]
        .flat()
        .map((row: Json) =>
          plain(
            Object.fromEntries(Object.entries(row).map(([k, v]) => [k, booleans.has(k) && v !== null ? v === 1 : v])),
          ),
        ),
    columnTypes: async (table) => {
      const [rows] = await target.admin.query(
        `SELECT COLUMN_NAME AS name, DATA_TYPE AS type, COLLATION_NAME AS collation FROM information_schema.COLUMNS
          WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
        [target.database, table],
      );
      return Object.fromEntries(
        (rows as Json[]).map((row) => [row.name, row.collation === null ? row.type : `${row.type} ${row.collation}`]),
      );
    },
    t: (table, place) => `${place}_${table}`,
    drop: () => target.drop(),
  };
}

describe.each([
  ['PostgreSQL', postgres],
  ['MariaDB', mysql],
])('the relational layout on %s (docs/reference.md §12, "Relational layout")', (_name, make) => {
  let target: Target;
  const daemon = useDatabase(2);
  const { client } = tableSinksClient(daemon);
  const sinkFor = (place: string, fields: Partial<Sink> = {}) =>
    tableSink(target.kind, target.url, {
      layout: 'relational',
      ...(target.kind === 'postgres' ? { schema: place } : { tablePrefix: `${place}_` }),
      ...fields,
    });
  const apply = (sink: Sink, entries: ChangeEntry[]) => client.apply(sink, sink.types ?? ALL_TYPES, entries);
  const select = (place: string, table: string, columns: string, order = 'owner_id, id') =>
    target.query(`SELECT ${columns} FROM ${target.t(table, place)} ORDER BY ${order}`);

  beforeAll(async () => {
    target = await make();
  });

  afterAll(async () => {
    await client.beforeApplicationShutdown();
    await target?.drop();
  });

  it('writes integer ids, typed columns, prices per currency, links in the platform’s order and <name>_id', async () => {
    const sink = sinkFor('rel');
    const batch = sampleBatch(new ChangeFactory());
    expect(await apply(sink, batch)).toEqual(committedOf(batch));
    const products = await select(
      'rel',
      'products',
      'owner_id, id, title, available, externally_managed_product_override_id AS emp, seq',
    );
    expect(products).toEqual([
      { owner_id: 'owner-a', id: 10, title: 'Product 10', available: true, emp: null, seq: 2 },
      { owner_id: 'owner-a', id: 11, title: 'Product 11', available: false, emp: null, seq: 3 },
      { owner_id: 'owner-b', id: 10, title: 'Other owner', available: true, emp: null, seq: 9 },
    ]);
    expect(await select('rel', 'product_prices', '*', 'owner_id, product_id')).toEqual([
      { owner_id: 'owner-a', product_id: 10, currency: 'GBP', cents: 450, format: '£4.50' },
      { owner_id: 'owner-a', product_id: 11, currency: 'GBP', cents: 850, format: '£8.50' },
      { owner_id: 'owner-b', product_id: 10, currency: 'GBP', cents: 850, format: '£8.50' },
    ]);
    expect(await select('rel', 'collection_products', '*', 'position')).toEqual([
      { owner_id: 'owner-a', collection_id: 1, product_id: 10, position: 0 },
      { owner_id: 'owner-a', collection_id: 1, product_id: 11, position: 1 },
    ]);
    expect(await select('rel', 'product_traits', '*', 'position')).toEqual([
      { owner_id: 'owner-a', product_id: 10, trait_id: 20, position: 0 },
    ]);
    expect(await select('rel', 'trait_trait_options', 'trait_option_id, position', 'position')).toEqual([
      { trait_option_id: 30, position: 0 },
      { trait_option_id: 31, position: 1 },
    ]);
    expect(await select('rel', 'trait_options', 'id, default_, trait_id')).toEqual([
      { id: 30, default_: true, trait_id: 20 },
    ]);
    expect(
      await select('rel', 'trait_option_cost_adjustments', 'trait_option_id, currency, cents', 'currency'),
    ).toEqual([{ trait_option_id: 30, currency: 'GBP', cents: 50 }]);
    expect(await select('rel', 'orders', 'id, note, store_id, user_id, table_id')).toEqual([
      { id: 40, note: 'no onions', store_id: 50, user_id: 9, table_id: null },
    ]);
    expect(await select('rel', 'order_order_products', 'order_id, order_product_id, position', 'position')).toEqual([
      { order_id: 40, order_product_id: 41, position: 0 },
    ]);
    expect(await select('rel', 'order_products', 'id, quantity, product_id')).toEqual([
      { id: 41, quantity: 3, product_id: 10 },
    ]);
    const [stored] = await select('rel', 'stores', 'resource');
    expect(json(stored.resource)).toEqual(batch[7].change.resource);

    const types = await target.columnTypes(target.t('products', 'rel'));
    const prices = await target.columnTypes(target.t('product_prices', 'rel'));
    const orders = await target.columnTypes(target.t('orders', 'rel'));
    if (target.kind === 'postgres') {
      expect([types.id, types.owner_id, types.title, prices.product_id, prices.cents, orders.user_id]).toEqual([
        'bigint',
        'text',
        'text',
        'bigint',
        'bigint',
        'text',
      ]);
    } else {
      expect([types.id, types.owner_id, types.title, prices.product_id, prices.currency, orders.user_id]).toEqual([
        'bigint',
        'varchar utf8mb4_bin',
        'longtext utf8mb4_unicode_ci',
        'bigint',
        'varchar utf8mb4_bin',
        'varchar utf8mb4_bin',
      ]);
      // Titles compare case-insensitively; owners (and text ids) exactly.
      expect(
        await target.query(`SELECT id FROM rel_products WHERE title = 'PRODUCT 10' AND owner_id = 'owner-a'`),
      ).toEqual([{ id: 10 }]);
      expect(await target.query(`SELECT id FROM rel_products WHERE owner_id = 'OWNER-A'`)).toEqual([]);
    }
  });

  it('writes an order product trait option, its table named within MySQL’s 64 characters after a 23-character prefix', async () => {
    const types = [...ALL_TYPES, 'order_product_trait_option'];
    const place = target.kind === 'mysql' ? 'a_prefix_of_22_letters' : 'longest';
    const sink = sinkFor(place, { types });
    const changes = new ChangeFactory();
    const option = {
      id: '60',
      type: 'order_product_trait_option',
      attributes: { id: 60, cost: { cents: 50, format: '£0.50', currency: { iso_code: 'GBP' } } },
      relationships: { trait_option: { data: { id: '30', type: 'trait_option' } } },
    };
    const orderProduct = {
      id: '41',
      type: 'order_product',
      attributes: { id: 41, quantity: 1 },
      relationships: { order_product_trait_options: { data: [{ id: '60', type: 'order_product_trait_option' }] } },
    };
    const written = [changes.upsert('o', option), changes.upsert('o', orderProduct)];
    expect(await apply(sink, written)).toEqual(committedOf(written));
    expect(await select(place, 'order_product_trait_options', 'id, trait_option_id')).toEqual([
      { id: 60, trait_option_id: 30 },
    ]);
    const longest = target.t('order_product_order_product_trait_options', place);
    expect(longest.length).toBe(target.kind === 'mysql' ? 64 : 49);
    expect(
      await target.query(`SELECT order_product_id, order_product_trait_option_id, position FROM ${longest}`),
    ).toEqual([{ order_product_id: 41, order_product_trait_option_id: 60, position: 0 }]);
  });

  it('names no column by a word either server reserves: every column of the layout, unquoted, makes a table', async () => {
    const names = [
      ...new Set(
        relationalTables([...ALL_TYPES, 'order_product_trait_option'], '').flatMap((table) =>
          table.columns.map((column) => column.name),
        ),
      ),
    ];
    expect(names).toContain('default_');
    await target.query(
      `CREATE TABLE ${target.t('unquoted', 'rel')} (${names.map((name) => `${name} integer`).join(', ')})`,
    );
    expect(Object.keys(await target.columnTypes(target.t('unquoted', 'rel'))).sort()).toEqual(names.sort());
  });

  it('a delete removes the row; an older upsert replayed later neither resurrects it nor moves a row back in time', async () => {
    await expectReplaysNeverMoveBack(
      sinkFor('replays', { types: ['product'] }),
      apply,
      async () =>
        (await select('replays', 'products', 'id, title, seq')).map((row) => [String(row.id), row.title, row.seq]),
      async () =>
        (await select('replays', target.kind === 'postgres' ? 'menu_sync_tombstones' : 'tombstones', '*')).map(
          (row) => ({ ...row, id: String(row.id) }),
        ),
    );
  });

  it('child and link rows are replaced with their row, never moved back, removed with it; links to it stay with their parent', async () => {
    const changes = new ChangeFactory();
    const sink = sinkFor('children', { types: ['product', 'collection'] });
    const priced = (id: string, cents: number, traitIds: string[], eur?: number) => {
      const resource = product(id, { cents, traitIds });
      if (eur !== undefined) resource.attributes.base_cost = { ...moneyMap(cents), ...moneyMap(eur, 'EUR') };
      return resource;
    };
    const first = [
      changes.upsert('o', priced('1', 100, ['7', '8'], 120)),
      changes.upsert('o', priced('2', 200, ['9'])),
      changes.upsert('o', collection('5', { productIds: ['2', '1'] })),
    ];
    const second = [changes.upsert('o', priced('1', 150, ['8'])), changes.delete('o', product('2'))];
    expect(await apply(sink, first)).toEqual(committedOf(first));
    expect(await apply(after(sink, first), second)).toEqual(committedOf(second));
    const state = async () => [
      await select('children', 'products', 'id, seq'),
      await select('children', 'product_prices', 'product_id, currency, cents', 'product_id, currency'),
      await select('children', 'product_traits', 'product_id, trait_id, position', 'product_id, position'),
      await select('children', 'collection_products', 'product_id, position', 'position'),
    ];
    const expected = [
      [{ id: 1, seq: 4 }],
      [{ product_id: 1, currency: 'GBP', cents: 150 }],
      [{ product_id: 1, trait_id: 8, position: 0 }],
      [
        { product_id: 2, position: 0 },
        { product_id: 1, position: 1 },
      ],
    ];
    expect(await state()).toEqual(expected);
    // A replay of both batches (a new epoch), and the first batch alone: nothing moves back, nothing comes back.
    expect(await apply({ ...sink, epoch: 1 }, [...first, ...second])).toEqual(
      // The batch's newest change of each resource: its first product's update, the delete, the collection.
      committedOf([second[0], second[1], first[2]]),
    );
    expect(await apply({ ...sink, epoch: 2 }, first)).toEqual(committedOf(first));
    expect(await state()).toEqual(expected);
  });

  it('an id that is not an integer fails the batch with an error naming it, and writes nothing of it', async () => {
    const changes = new ChangeFactory();
    const sink = sinkFor('strings', { types: ['product', 'trait_option'] });
    const first = [changes.upsert('o', product('1'))];
    expect(await apply(sink, first)).toEqual(committedOf(first));
    const bad = [changes.upsert('o', product('2')), changes.upsert('o', traitOption('3', { traitId: 'large' }))];
    const outcome = await apply(after(sink, first), bad);
    expect(outcome).toEqual({
      kind: 'retry',
      status: 0,
      error:
        'the trait id "large" of trait_option "3" (owner "o") is not an integer (a decimal of at most 19 digits, no leading zero): the relational layout keeps it as a bigint, so the batch is not written',
    });
    expect(await select('strings', 'products', 'id')).toEqual([{ id: 1 }]);
    expect(await client.targetCursor(sink)).toEqual({ cursor: { cursor: first[0].position, epoch: 0 } });
  });
});

import { SPEC } from './table-columns.js';
import {
  columnName,
  LONGEST_RELATIONAL_NAME,
  RELATIONAL_PREFIX_MAX,
  RELATIONSHIPS,
  relationalTables,
  relationalType,
} from './relational-tables.js';

const shape = (type: string) =>
  [relationalType(type, '')].flatMap((spec) => [
    [spec.table.name, spec.table.columns.map((column) => `${column.name}:${column.kind}`), spec.table.primaryKey],
    ...spec.children.map(({ table }) => [
      table.name,
      table.columns.map((column) => `${column.name}:${column.kind}`),
      table.primaryKey,
    ]),
  ]);

describe('relational layout tables (docs/reference.md §12, "Relational layout")', () => {
  it('products: integer id, no money column, to-one as <name>_id, prices and traits as child tables', () => {
    expect(shape('product')).toEqual([
      [
        'products',
        [
          'owner_id:text',
          'id:integer',
          'title:text',
          'description:text',
          'available:boolean',
          'externally_managed_product_override_id:text',
          'resource:json',
          'version_occurred_at:timestamp',
          'seq:integer',
          'synced_at:timestamp',
        ],
        ['owner_id', 'id'],
      ],
      [
        'product_prices',
        ['owner_id:text', 'product_id:integer', 'currency:text', 'cents:integer', 'format:text'],
        ['owner_id', 'product_id', 'currency'],
      ],
      [
        'product_traits',
        ['owner_id:text', 'product_id:integer', 'trait_id:integer', 'position:integer'],
        ['owner_id', 'product_id', 'trait_id'],
      ],
    ]);
  });

  it('collections, traits and trait options: their link tables, cost adjustments, default_ and trait_id', () => {
    expect(shape('collection').slice(1)).toEqual([
      [
        'collection_products',
        ['owner_id:text', 'collection_id:integer', 'product_id:integer', 'position:integer'],
        ['owner_id', 'collection_id', 'product_id'],
      ],
    ]);
    expect(shape('trait').map(([name]) => name)).toEqual(['traits', 'trait_trait_options']);
    const option = relationalType('trait_option', '');
    expect(option.table.columns.map((column) => column.name)).toEqual([
      'owner_id',
      'id',
      'title',
      'description',
      'available',
      'default_',
      'trait_id',
      'resource',
      'version_occurred_at',
      'seq',
      'synced_at',
    ]);
    expect(option.table.columns.find((column) => column.name === 'trait_id')?.kind).toBe('integer');
    expect(shape('trait_option')[1]).toEqual([
      'trait_option_cost_adjustments',
      ['owner_id:text', 'trait_option_id:integer', 'currency:text', 'cents:integer', 'format:text'],
      ['owner_id', 'trait_option_id', 'currency'],
    ]);
  });

  it('orders and stores: integer ids, ids of types the spec does not show as exact text, Money objects as JSON', () => {
    const order = relationalType('order', 'shop_');
    expect(order.table.name).toBe('shop_orders');
    expect(order.table.columns.filter((column) => column.name.endsWith('_id') || column.kind === 'json')).toEqual([
      { name: 'owner_id', kind: 'text', exact: true },
      { name: 'delivery_method', kind: 'json' },
      { name: 'subtotal', kind: 'json' },
      { name: 'total', kind: 'json' },
      { name: 'history', kind: 'json' },
      { name: 'store_id', kind: 'integer' },
      { name: 'user_id', kind: 'text', exact: true },
      { name: 'table_id', kind: 'text', exact: true },
      { name: 'feedback_id', kind: 'text', exact: true },
      { name: 'resource', kind: 'json' },
    ]);
    expect(order.children.map((child) => child.table.name)).toEqual(['shop_order_order_products']);
    expect(relationalType('store', '').children.map((child) => child.table.columns[2])).toEqual([
      { name: 'photo_id', kind: 'text', exact: true },
      { name: 'table_id', kind: 'text', exact: true },
    ]);
  });

  it('names every relationship the document layout names, and only words no server reserves', () => {
    for (const [type, { relationships }] of Object.entries(SPEC))
      expect([type, Object.keys(RELATIONSHIPS[type])]).toEqual([type, relationships]);
    expect(columnName('default')).toBe('default_');
    expect(columnName('title')).toBe('title');
    const renamed = relationalTables(Object.keys(SPEC), '')
      .flatMap((table) => table.columns.map((column) => column.name))
      .filter((name) => name.endsWith('_') && !name.endsWith('_id'));
    expect([...new Set(renamed)]).toEqual(['default_']);
  });

  it('leaves a MySQL prefix of at most 23 characters room for its longest table name', () => {
    expect([LONGEST_RELATIONAL_NAME, RELATIONAL_PREFIX_MAX]).toEqual([41, 23]);
  });
});

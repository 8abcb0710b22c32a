import { relationalTables } from './relational-tables.js';
import { describeRefills } from './table-refill.js';
import { recreations, refillPosition } from './table-recreate.js';
import { sinkTables } from './table-schema.js';

describe('tables the sink wrote before, found missing (docs/reference.md §12)', () => {
  const types = ['collection', 'product'];

  it('document layout: the types whose table is missing, in the order followed', () => {
    const tables = sinkTables(types, 'p_');
    const missing = [tables.tables.get('product')!, tables.tombstones];
    expect(
      recreations(types, tables.tables, false, 'p_', missing).map((r) => [r.type, r.missing.map((t) => t.name)]),
    ).toEqual([['product', ['p_products']]]);
  });

  it('relational layout: a type’s own table and its child tables, each with the type', () => {
    const all = relationalTables(types, '');
    const missing = all.filter((table) => ['products', 'collection_products', 'product_prices'].includes(table.name));
    const found = recreations(types, sinkTables(types, '').tables, true, '', missing);
    expect(found.map((r) => [r.type, r.layout.kind, r.missing.map((t) => t.name)])).toEqual([
      ['collection', 'relational', ['collection_products']],
      ['product', 'relational', ['products', 'product_prices']],
    ]);
  });

  it('re-fills at the snapshot’s boundary while one is delivered, else at the target’s cursor, else not at all', () => {
    const cursor = { transactionId: '7', seq: '70' };
    const boundary = { transactionId: '9', seq: '90' };
    expect(refillPosition({ cursor, epoch: 1 }, boundary)).toEqual(boundary);
    expect(refillPosition({ cursor, epoch: 1 }, null)).toEqual(cursor);
    expect(refillPosition(null, null)).toBeNull();
  });

  it('says what it re-created and where the rows came from', () => {
    expect(
      describeRefills([
        { table: 'products', rows: 1, from: 'the change log at Ny43MA' },
        { table: 'products', columns: ['title'], rows: 2 },
      ]),
    ).toBe(
      're-created products (missing) and re-filled 1 row from the change log at Ny43MA; re-added products.title (missing) and re-filled 2 rows from their resource',
    );
  });
});

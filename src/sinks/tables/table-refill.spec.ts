import { product } from '../../../test/support/menu-events.js';
import { ChangeFactory } from '../../../test/support/table-sinks.js';
import { relationalTables, relationalType } from './relational-tables.js';
import { planMissing } from './table-refill.js';
import { sinkTables } from './table-schema.js';

describe('a missing column of a table with rows (docs/reference.md §12)', () => {
  const tables = sinkTables(['product'], '');
  const products = tables.tables.get('product')!;
  const column = (name: string) => ({ name, kind: 'text' as const });
  const plan = (...args: Parameters<typeof planMissing>) => {
    const { add, refill } = planMissing(...args);
    return { add, refill };
  };
  const { change } = new ChangeFactory().upsert('o', product('7', { title: 'Seven' }));
  const stored = { owner_id: 'o', id: '7', resource: change.resource };

  it('document layout: re-adds and re-fills what the resource gives back; never the key, resource or seq', () => {
    const missing = ['title', 'traits_ids', 'version_occurred_at', 'synced_at', 'resource', 'seq'].map(column);
    expect(plan(products, missing, true)).toEqual({ add: missing.slice(0, 4), refill: missing.slice(0, 4) });
    const values = planMissing(products, missing, true).values(stored);
    expect([values.title, values.traits_ids, values.version_occurred_at]).toEqual([
      'Seven',
      [],
      '2025-01-01T00:00:01.000Z',
    ]);
  });

  it('relational layout: a type’s table as the document one, a child table nothing', () => {
    const spec = relationalType('product', '');
    const missing = [column('title'), column('resource')];
    expect(plan(spec.table, missing, true, [spec])).toEqual({ add: [column('title')], refill: [column('title')] });
    expect(planMissing(spec.table, missing, true, [spec]).values(stored).title).toBe('Seven');
    const prices = relationalTables(['product'], '').find((table) => table.name === 'product_prices')!;
    expect(plan(prices, [column('format')], true, [spec])).toEqual({ add: [], refill: [] });
  });

  it('adds everything to a table without rows, and to the cursors', () => {
    const missing = [column('title'), column('resource')];
    expect(plan(products, missing, false)).toEqual({ add: missing, refill: [] });
    expect(plan(tables.cursors, [column('epoch')], true)).toEqual({ add: [column('epoch')], refill: [] });
  });
});

import { product } from '../../../test/support/menu-events.js';
import { ChangeFactory } from '../../../test/support/table-sinks.js';
import { relationalTables } from './relational-tables.js';
import { planMissing, refillValues } from './table-refill.js';
import { sinkTables } from './table-schema.js';

describe('a missing column of a table with rows (docs/reference.md §12)', () => {
  const tables = sinkTables(['product'], '');
  const products = tables.tables.get('product')!;
  const column = (name: string) => ({ name, kind: 'text' as const });

  it('re-adds and re-fills what the resource gives back; never the key, resource or seq', () => {
    const missing = ['title', 'traits_ids', 'version_occurred_at', 'synced_at', 'resource', 'seq'].map(column);
    expect(planMissing(products, missing, true)).toEqual({
      add: missing.slice(0, 4),
      refill: missing.slice(0, 4),
    });
  });

  it('adds everything to a table without rows and to the cursors, nothing to a relational table with rows', () => {
    const missing = [column('title'), column('resource')];
    expect(planMissing(products, missing, false)).toEqual({ add: missing, refill: [] });
    expect(planMissing(tables.cursors, [column('epoch')], true)).toEqual({ add: [column('epoch')], refill: [] });
    const [relational] = relationalTables(['product'], '');
    expect(planMissing(relational, missing, true)).toEqual({ add: [], refill: [] });
  });

  it('re-fills a column as a batch writes it, from the stored resource', () => {
    const { change } = new ChangeFactory().upsert('o', product('7', { title: 'Seven' }));
    const columns = products.columns.filter((c) => ['title', 'available'].includes(c.name));
    expect(
      refillValues(products, [...columns, { name: 'version_occurred_at', kind: 'timestamp' }], {
        owner_id: 'o',
        id: '7',
        resource: change.resource,
      }),
    ).toEqual(['Seven', true, '2025-01-01T00:00:01.000Z']);
  });
});

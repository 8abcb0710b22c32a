import { product } from '../../../test/support/menu-events.js';
import { ChangeFactory } from '../../../test/support/table-sinks.js';
import { compareTable, documentRow, normalised } from './table-verify.js';
import { comparedColumns } from './table-verify.js';
import { sinkTables } from './table-schema.js';

describe('sinks verify: a table compared with the read model (docs/reference.md §12)', () => {
  const products = sinkTables(['product'], '').tables.get('product')!;
  const changes = new ChangeFactory();
  const one = changes.upsert('o', product('1', { title: 'One' })).change;
  const two = changes.upsert('o', product('2', { title: 'Two' })).change;
  /** A row as a driver gives it back: MySQL's JSON as text, DATETIME as text, booleans as 0/1, bigints as text. */
  const asMysql = (change: typeof one) =>
    Object.fromEntries(
      comparedColumns(products).map((column) => {
        const value = documentRow(products, change)[column.name] ?? null;
        if (value === null) return [column.name, null];
        if (column.kind === 'boolean') return [column.name, value ? 1 : 0];
        if (column.kind === 'integer') return [column.name, String(value)];
        if (column.kind === 'timestamp')
          return [column.name, new Date(String(value)).toISOString().replace('T', ' ').replace('Z', '')];
        if (column.kind === 'json') return [column.name, JSON.stringify(value)];
        return [column.name, value];
      }),
    );

  it('reads each driver’s forms as one', () => {
    expect(normalised('timestamp', '2025-01-01 00:00:01.000')).toBe('2025-01-01T00:00:01.000Z');
    expect(normalised('timestamp', new Date('2025-01-01T00:00:01Z'))).toBe('2025-01-01T00:00:01.000Z');
    expect([normalised('boolean', 0), normalised('boolean', '1'), normalised('boolean', true)]).toEqual([
      false,
      true,
      true,
    ]);
    expect(normalised('json', '{"b":1,"a":[2]}')).toBe(normalised('json', { a: [2], b: 1 }));
    expect([normalised('integer', '12'), normalised('integer', 12)]).toEqual(['12', '12']);
  });

  it('equal rows are equal, whatever the driver; a row missing, extra or changed is named', () => {
    const equal = compareTable(products, [one, two], [asMysql(one), asMysql(two)]);
    expect([equal.equal, equal.api, equal.missing, equal.extra, equal.changed]).toEqual([
      true,
      equal.target,
      [],
      [],
      [],
    ]);
    const edited = { ...asMysql(one), title: 'edited' };
    const stray = { ...asMysql(two), id: '3' };
    const differs = compareTable(products, [one, two], [edited, stray]);
    expect([
      differs.equal,
      differs.api.rows,
      differs.target.rows,
      differs.missing,
      differs.extra,
      differs.changed,
    ]).toEqual([false, 2, 2, [{ owner_id: 'o', id: '2' }], [{ owner_id: 'o', id: '3' }], [{ owner_id: 'o', id: '1' }]]);
  });
});

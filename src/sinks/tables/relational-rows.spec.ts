import { ChangeFactory } from '../../../test/support/table-sinks.js';
import { collection, moneyMap, product, toMany, traitOption } from '../../../test/support/menu-events.js';
import { planRelational, RelationalIdError, relationalRows, rowKey } from './relational-rows.js';
import { relationalType } from './relational-tables.js';

const changes = new ChangeFactory();
const PRODUCTS = relationalType('product', '');

describe('relational layout rows (docs/reference.md §12, "Relational layout")', () => {
  it('a product: typed columns, a price row per currency, its traits in order', () => {
    const resource = product('10', { traitIds: ['21', '20'], title: 'Soup' });
    resource.attributes.base_cost = { ...moneyMap(450), ...moneyMap(500, 'EUR') };
    const { change } = changes.upsert('o', resource, 7);
    const { row, children } = relationalRows(PRODUCTS, change);
    expect(row).toEqual({
      owner_id: 'o',
      id: '10',
      title: 'Soup',
      description: 'The description of product 10.',
      available: true,
      externally_managed_product_override_id: null,
      resource: change.resource,
      version_occurred_at: '2025-01-01T00:00:07.000Z',
      seq: 7,
    });
    expect(Object.fromEntries(children)).toEqual({
      product_prices: [
        { owner_id: 'o', product_id: '10', currency: 'GBP', cents: 450, format: '£4.50' },
        { owner_id: 'o', product_id: '10', currency: 'EUR', cents: 500, format: '€5.00' },
      ],
      product_traits: [
        { owner_id: 'o', product_id: '10', trait_id: '21', position: 0 },
        { owner_id: 'o', product_id: '10', trait_id: '20', position: 1 },
      ],
    });
  });

  it('a repeated child keeps its first place; a to-one id is read from its identifier; values of another type are null', () => {
    const { change } = changes.upsert('o', collection('1', { productIds: ['12', '11', '12', '13'] }));
    expect(relationalRows(relationalType('collection', ''), change).children.get('collection_products')).toEqual([
      { owner_id: 'o', collection_id: '1', product_id: '12', position: 0 },
      { owner_id: 'o', collection_id: '1', product_id: '11', position: 1 },
      { owner_id: 'o', collection_id: '1', product_id: '13', position: 2 },
    ]);
    const option = traitOption('30', { traitId: '20', isDefault: true });
    option.attributes.available = 'yes';
    option.attributes.cost_adjustment = { GBP: { cents: '50' } };
    const rows = relationalRows(relationalType('trait_option', ''), changes.upsert('o', option).change);
    expect([rows.row.trait_id, rows.row.default_, rows.row.available]).toEqual(['20', true, null]);
    expect(rows.children.get('trait_option_cost_adjustments')).toEqual([
      { owner_id: 'o', trait_option_id: '30', currency: 'GBP', cents: null, format: null },
    ]);
  });

  it('an id that is not an integer fails with an error naming it, whether the resource’s or one it names', () => {
    const error = (id: string) =>
      `the id ${JSON.stringify(id)} of product (owner "o") is not an integer (a decimal of at most 19 digits, no leading zero): the relational layout keeps it as a bigint, so the batch is not written`;
    for (const id of ['p10', '010', '-0', '1.5', '9223372036854775808', ''])
      expect(() => relationalRows(PRODUCTS, changes.upsert('o', product(id)).change)).toThrow(
        new RelationalIdError(error(id)),
      );
    for (const id of ['0', '-9223372036854775808', '9223372036854775807'])
      expect(relationalRows(PRODUCTS, changes.upsert('o', product(id)).change).row.id).toBe(id);
    const resource = product('10');
    resource.relationships.traits = toMany('trait', ['20', 'large']);
    expect(() => relationalRows(PRODUCTS, changes.upsert('o', resource).change)).toThrow(
      'the traits id "large" of product "10" (owner "o") is not an integer',
    );
  });

  it('plans upserts newer than their row and tombstone, removals of rows older than the delete, and every delete', () => {
    const f = new ChangeFactory();
    const batch = [
      f.upsert('o', product('1'), 10).change,
      f.upsert('o', product('2'), 11).change,
      f.upsert('o', product('3'), 12).change,
      f.upsert('o', product('4'), 13).change,
      f.delete('o', product('5'), 14).change,
      f.delete('o', product('6'), 15).change,
      f.delete('o', product('7'), 16).change,
    ];
    const stored = new Map<string, number | null>([
      [rowKey('o', '2'), 20],
      [rowKey('o', '3'), null],
      [rowKey('o', '5'), 3],
      [rowKey('o', '6'), 30],
    ]);
    const buried = new Map([[rowKey('o', '4'), 40]]);
    const plan = planRelational(batch, stored, buried);
    expect(plan.upserts.map((change) => change.id)).toEqual(['1', '3']);
    expect(plan.removals.map((change) => change.id)).toEqual(['5']);
    expect(plan.deletes.map((change) => change.id)).toEqual(['5', '6', '7']);
  });
});

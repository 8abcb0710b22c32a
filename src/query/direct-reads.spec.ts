import fc from 'fast-check';
import { queries, viaPipe } from '../../test/support/query-parity.js';
import { readAsOfQuery, readListQuery } from './direct-reads.js';
import { AsOfQuery, ListQuery, OrderQuery, ProductQuery } from './resource-query.dto.js';

const LIST_NAMES = [
  'owner_id',
  'limit',
  'cursor',
  'include_deleted',
  'as_of',
  'min_cursor',
  'updated_since',
  'expand',
  'other',
];

describe('direct reads accept and refuse exactly what the DTOs do, naming the same field', () => {
  it('list queries (ListQuery)', async () => {
    await fc.assert(
      fc.asyncProperty(queries(LIST_NAMES), async (query) => {
        expect(readListQuery(query)).toEqual(await viaPipe(ListQuery, query));
      }),
      { numRuns: 3000 },
    );
  });

  it('by id queries (AsOfQuery)', async () => {
    await fc.assert(
      fc.asyncProperty(queries(['as_of', 'min_cursor', 'expand', 'owner_id', 'other']), async (query) => {
        expect(readAsOfQuery(query)).toEqual(await viaPipe(AsOfQuery, query));
      }),
      { numRuns: 1000 },
    );
  });

  it('by id queries the product and order routes take directly read as ProductQuery and OrderQuery read them', async () => {
    await fc.assert(
      fc.asyncProperty(queries(['as_of', 'min_cursor', 'expand', 'other']), async (query) => {
        const reading = readAsOfQuery(query);
        if (!('query' in reading)) return;
        expect(await viaPipe(ProductQuery, query)).toEqual(reading);
        expect(await viaPipe(OrderQuery, query)).toEqual(reading);
      }),
      { numRuns: 500 },
    );
  });

  const cases: Array<[string, Record<string, unknown>, unknown]> = [
    ['defaults', {}, { query: { limit: 100, include_deleted: false } }],
    [
      'a usual page',
      { owner_id: 'o-1', limit: '100', cursor: 'MDAwMQ' },
      { query: { owner_id: 'o-1', limit: 100, cursor: 'MDAwMQ', include_deleted: false } },
    ],
    [
      'as_of and updated_since as instants',
      { as_of: '2026-01-01T00:00:00Z', updated_since: '2026-01-01', include_deleted: 'true' },
      {
        query: {
          as_of: new Date('2026-01-01T00:00:00Z'),
          updated_since: new Date('2026-01-01'),
          include_deleted: true,
          limit: 100,
        },
      },
    ],
    ['a limit out of range', { limit: '1001' }, { refused: 'limit' }],
    ['a limit not in digits', { limit: '1e3' }, { refused: 'limit' }],
    ['a repeated owner', { owner_id: ['1', 'o'] }, { refused: 'owner_id' }],
    ['an owner of 256 characters', { owner_id: 'x'.repeat(256) }, { refused: 'owner_id' }],
    [
      'an owner of 255 characters, one a surrogate pair',
      { owner_id: `${'x'.repeat(254)}😀` },
      { query: { owner_id: `${'x'.repeat(254)}😀`, limit: 100, include_deleted: false } },
    ],
    ['an unknown parameter before a bad one', { limit: '0', expand: 'traits' }, { refused: 'expand' }],
    ['the class own fields before PageQuery limit', { limit: '0', cursor: '!' }, { refused: 'cursor' }],
    ['the fields in declared order', { as_of: 'x', include_deleted: 'yes' }, { refused: 'include_deleted' }],
    [
      'a min_cursor',
      { min_cursor: 'NzQ1LjEy' },
      { query: { min_cursor: 'NzQ1LjEy', limit: 100, include_deleted: false } },
    ],
    ['a min_cursor of 65 characters', { min_cursor: 'x'.repeat(65) }, { refused: 'min_cursor' }],
    ['as_of before min_cursor', { min_cursor: '!', as_of: 'x' }, { refused: 'as_of' }],
  ];

  it.each(cases)('list: %s', async (_name, query, expected) => {
    expect(readListQuery(query)).toEqual(expected);
    expect(await viaPipe(ListQuery, query)).toEqual(expected);
  });

  it.each([
    [{}, { query: {} }],
    [{ as_of: '2026-01-01' }, { query: { as_of: new Date('2026-01-01') } }],
    [{ as_of: '2026-13-01' }, { refused: 'as_of' }],
    [{ min_cursor: 'NzQ1LjEy' }, { query: { min_cursor: 'NzQ1LjEy' } }],
    [{ min_cursor: 'a.b' }, { refused: 'min_cursor' }],
    [{ expand: 'traits' }, { refused: 'expand' }],
  ])('by id: %j', async (query, expected) => {
    expect(readAsOfQuery(query)).toEqual(expected);
    expect(await viaPipe(AsOfQuery, query)).toEqual(expected);
  });
});

import fc from 'fast-check';
import { queries, viaPipe } from '../../test/support/query-parity.js';
import { readMenuQuery } from './menu-direct-read.js';
import { MenuQuery } from './menu-query.dto.js';

describe('the direct /menu read accepts and refuses exactly what MenuQuery does, naming the same field', () => {
  it('any query', async () => {
    await fc.assert(
      fc.asyncProperty(queries(['owner_id', 'form', 'as_of', 'min_cursor', 'limit', 'other']), async (query) => {
        expect(readMenuQuery(query)).toEqual(await viaPipe(MenuQuery, query));
      }),
      { numRuns: 2000 },
    );
  });

  it.each([
    [{ owner_id: 'o-1' }, { query: { owner_id: 'o-1', form: 'expanded' } }],
    [
      { owner_id: 'o-1', form: 'normalized', as_of: '2026-01-01T00:00:00Z' },
      { query: { owner_id: 'o-1', form: 'normalized', as_of: new Date('2026-01-01T00:00:00Z') } },
    ],
    [{}, { refused: 'owner_id' }],
    [{ form: 'normalized' }, { refused: 'owner_id' }],
    [{ owner_id: 'o-1', form: 'Normalized' }, { refused: 'form' }],
    [{ form: 'x', as_of: 'x', other: '1' }, { refused: 'other' }],
    [{ owner_id: 'o-1', as_of: '2026-13-01T00:00:00Z' }, { refused: 'as_of' }],
    [
      { owner_id: 'o-1', min_cursor: 'NzQ1LjEy' },
      { query: { owner_id: 'o-1', form: 'expanded', min_cursor: 'NzQ1LjEy' } },
    ],
    [{ owner_id: 'o-1', min_cursor: '' }, { refused: 'min_cursor' }],
  ])('%j', async (query, expected) => {
    expect(readMenuQuery(query)).toEqual(expected);
    expect(await viaPipe(MenuQuery, query)).toEqual(expected);
  });
});

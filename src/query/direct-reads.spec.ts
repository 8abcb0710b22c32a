import 'reflect-metadata';
import fc from 'fast-check';
import type { Type } from '@nestjs/common';
import { createValidationPipe } from '../common/validation.pipe.js';
import { plainAsOfQuery, plainListQuery, plainMenuQuery } from './direct-reads.js';
import { AsOfQuery, ListQuery, MenuQuery } from './resource-query.dto.js';

const pipe = createValidationPipe();

/** What Nest's pipeline makes of a query: the DTO's fields, or the refusal. */
async function viaPipe(metatype: Type, query: Record<string, unknown>): Promise<Record<string, unknown> | 'refused'> {
  try {
    return { ...((await pipe.transform(query, { type: 'query', metatype })) as Record<string, unknown>) };
  } catch {
    return 'refused';
  }
}

const values = fc.oneof(
  fc.constantFrom(
    '',
    '0',
    '1',
    '7',
    '100',
    '1000',
    '1001',
    '01',
    '1e3',
    '-1',
    ' 5',
    'true',
    'false',
    'TRUE',
    'expanded',
    'normalized',
    'Normalized',
    'o-1',
    'MDAwMQ',
    'a b',
    'a/b',
    'x'.repeat(255),
    'x'.repeat(256),
    '2026-01-01T00:00:00Z',
    '2026-01-01',
    '2026-02-30',
    '2026-13-01T00:00:00Z',
    '2026-01-01T00:00:00.123+01:00',
    '2026-01-01T24:00:00Z',
    '20260101',
    '2026-01-01 00:00:00Z',
  ),
  fc.string({ maxLength: 12 }),
  fc.array(fc.constantFrom('1', 'o'), { minLength: 2, maxLength: 2 }),
);
const queries = (names: string[]) => fc.dictionary(fc.constantFrom(...names), values, { maxKeys: 5 });

describe('direct reads take only queries the DTOs accept, read as the DTOs read them', () => {
  it('list queries', async () => {
    await fc.assert(
      fc.asyncProperty(
        queries(['owner_id', 'limit', 'cursor', 'include_deleted', 'as_of', 'updated_since', 'expand', 'other']),
        async (query) => {
          const plain = plainListQuery(query);
          if (plain === undefined) return;
          expect(await viaPipe(ListQuery, query)).toEqual(plain);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('menu queries', async () => {
    await fc.assert(
      fc.asyncProperty(queries(['owner_id', 'form', 'as_of', 'other']), async (query) => {
        const plain = plainMenuQuery(query);
        if (plain === undefined) return;
        expect(await viaPipe(MenuQuery, query)).toEqual(plain);
      }),
      { numRuns: 2000 },
    );
  });

  it('by id queries', async () => {
    await fc.assert(
      fc.asyncProperty(queries(['as_of', 'expand', 'other']), async (query) => {
        const plain = plainAsOfQuery(query);
        if (plain === undefined) return;
        expect(await viaPipe(AsOfQuery, query)).toEqual(plain);
      }),
      { numRuns: 1000 },
    );
  });

  it('takes the usual shapes (the fast path is not dead)', () => {
    expect(plainListQuery({ owner_id: 'o-1', limit: '100', cursor: 'MDAwMQ' })).toEqual({
      owner_id: 'o-1',
      limit: 100,
      cursor: 'MDAwMQ',
      include_deleted: false,
    });
    expect(plainListQuery({})).toEqual({ limit: 100, include_deleted: false });
    expect(plainMenuQuery({ owner_id: 'o-1' })).toEqual({ owner_id: 'o-1', form: 'expanded' });
    expect(plainListQuery({ owner_id: 'o-1', as_of: '2026-01-01T00:00:00Z' })).toEqual({
      owner_id: 'o-1',
      as_of: new Date('2026-01-01T00:00:00Z'),
      limit: 100,
      include_deleted: false,
    });
    expect(plainAsOfQuery({})).toEqual({});
    expect(plainAsOfQuery({ as_of: '2026-01-01' })).toEqual({ as_of: new Date('2026-01-01') });
    expect(plainAsOfQuery({ expand: 'traits' })).toBeUndefined();
    expect(plainMenuQuery({ form: 'normalized' })).toBeUndefined();
  });
});

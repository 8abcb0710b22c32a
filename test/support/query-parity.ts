import 'reflect-metadata';
import fc from 'fast-check';
import type { Type } from '@nestjs/common';
import { toProblem } from '../../src/common/problem-details.filter.js';
import { createValidationPipe } from '../../src/common/validation.pipe.js';
import type { QueryReading } from '../../src/query/direct-reads.js';

const pipe = createValidationPipe();

/** What Nest's pipeline makes of a query: the DTO's fields, or the field its problem names. */
export async function viaPipe(metatype: Type, query: Record<string, unknown>): Promise<QueryReading> {
  try {
    return { query: { ...((await pipe.transform(query, { type: 'query', metatype })) as Record<string, unknown>) } };
  } catch (error) {
    const problem = toProblem(error);
    if (problem.status !== 400) throw error;
    return { refused: problem.field as string };
  }
}

/** Query values near every edge the DTOs draw, and any short string; a pair is a repeated parameter. */
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
    '0x10',
    '9'.repeat(16),
    'true',
    'false',
    'TRUE',
    'expanded',
    'normalized',
    'Normalized',
    'traits',
    'order_products',
    'o-1',
    'MDAwMQ',
    'a b',
    'a/b',
    'x'.repeat(255),
    'x'.repeat(256),
    'x'.repeat(400),
    'x'.repeat(401),
    // MaxLength counts a surrogate pair, and a character with its presentation selector, as one.
    `${'x'.repeat(254)}😀`,
    '😀'.repeat(128),
    '😀'.repeat(256),
    `${'x'.repeat(255)}\uFE0F`,
    `${'x'.repeat(255)}\uFE0F\uFE0F`,
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
  fc.string({ maxLength: 6, unit: 'binary' }),
  fc.array(fc.constantFrom('1', 'o', 'true', '2026-01-01'), { minLength: 2, maxLength: 2 }),
);

/** Queries of up to five of `names`, in any order (the first unknown one is the one a refusal names). */
export const queries = (names: string[]) => fc.dictionary(fc.constantFrom(...names), values, { maxKeys: 5 });

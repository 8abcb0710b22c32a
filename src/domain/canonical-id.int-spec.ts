import fc from 'fast-check';
import { useDatabase } from '../../test/support/database.js';
import { canonicalId, parseExact } from './canonical-id.js';

const db = useDatabase(2);

/** JSON number texts: integers of any size, with fraction zeros or digits, exponents, signs. */
const numberText = fc
  .tuple(
    fc.constantFrom('', '-'),
    fc.oneof(fc.constant('0'), fc.bigInt({ min: 1n, max: 10n ** 300n }).map(String)),
    fc.option(fc.stringMatching(/^[0-9]{1,6}$/), { nil: undefined }),
    fc.option(fc.tuple(fc.constantFrom('e', 'E'), fc.constantFrom('', '+', '-'), fc.integer({ min: 0, max: 400 })), {
      nil: undefined,
    }),
  )
  .map(
    ([sign, whole, fraction, exponent]) =>
      `${sign}${whole}${fraction === undefined ? '' : `.${fraction}`}${exponent === undefined ? '' : exponent.join('')}`,
  );

const idJson = fc.oneof(
  numberText,
  fc.constantFrom(
    '1.0',
    '1e0',
    '1E+0',
    '-0',
    '0.5',
    '10e-1',
    '9007199254740993',
    '1e254',
    '1e255',
    '"1"',
    '"1.0"',
    'null',
    'true',
    '{}',
    '[1]',
  ),
  fc.string({ unit: 'grapheme' }).map((text) => JSON.stringify(text)),
  fc
    .string({ unit: 'binary' })
    .filter((text) => !text.includes('\u0000') && text.isWellFormed())
    .map((text) => JSON.stringify(text)),
);

describe('menu_sync_canonical_id (SQL) and canonicalId (TypeScript)', () => {
  it('agree on every JSON value as an id', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(idJson, { minLength: 1, maxLength: 50 }), async (values) => {
        const rows: Array<{ id: string | null }> = await db.dataSource.query(
          `SELECT menu_sync_canonical_id(value::jsonb) AS id FROM unnest($1::text[]) WITH ORDINALITY AS v(value, n) ORDER BY n`,
          [values],
        );
        expect(rows.map((row) => row.id ?? undefined)).toEqual(
          values.map((value) => canonicalId((parseExact(`[${value}]`) as unknown[])[0])),
        );
      }),
      { numRuns: 60 },
    );
  });

  it('is inlined by the planner (plain SQL, IMMUTABLE): no function call per row', async () => {
    const [plan] = await db.dataSource.query(
      `EXPLAIN (VERBOSE, FORMAT JSON) SELECT menu_sync_canonical_id(value) FROM jsonb_array_elements('["1", 1.0]') AS v(value)`,
    );
    const output = JSON.stringify(plan['QUERY PLAN'][0].Plan.Output);
    expect(output).toContain('jsonb_typeof');
    expect(output).not.toContain('menu_sync_canonical_id');
  });
});

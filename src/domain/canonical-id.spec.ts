import fc from 'fast-check';
import { canonicalId, integerText, parseExact } from './canonical-id.js';

/** The id of `json`'s first element as ingress reads it: from the exact parse. */
const idOfText = (json: string) => canonicalId((parseExact(`[${json}]`) as unknown[])[0]);

describe('canonicalId', () => {
  it.each([
    ['"1"', '1'],
    ['"1.0"', '1.0'],
    ['"é🍕"', 'é🍕'],
    ['""', ''],
    ['1', '1'],
    ['1.0', '1'],
    ['1e0', '1'],
    ['1E+0', '1'],
    ['10e-1', '1'],
    ['1.5e1', '15'],
    ['-0', '0'],
    ['-0.0e3', '0'],
    ['-42', '-42'],
    ['12345678901234567890123', '12345678901234567890123'],
    ['9007199254740993', '9007199254740993'],
    ['1e21', '1000000000000000000000'],
    ['0.000e99999', '0'],
  ])('reads %s as %j', (json, id) => {
    expect(idOfText(json)).toBe(id);
  });

  it.each(['1.5', '1e-1', '0.1e1000', '1e255', '1e1001', 'null', 'true', '{}', '[]'])('reads %s as no id', (json) => {
    expect(idOfText(json)).toBeUndefined();
  });

  it('reads the largest integers of 255 digits, and none of 256', () => {
    expect(integerText('9'.repeat(255))).toBe('9'.repeat(255));
    expect(integerText(`-${'9'.repeat(255)}`)).toBe(`-${'9'.repeat(255)}`);
    expect(integerText(`1${'0'.repeat(255)}`)).toBeUndefined();
  });

  it('reads a JavaScript number as the integer it holds (no text to read it from)', () => {
    expect(canonicalId(1)).toBe('1');
    expect(canonicalId(2 ** 64)).toBe('18446744073709551616');
    expect(canonicalId(1.5)).toBeUndefined();
    expect(canonicalId(Number.NaN)).toBeUndefined();
  });

  it("gives every spelling of an integer (fraction zeros, exponents) the same id, the integer's decimal text", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }), fc.nat(5), fc.nat(5), (value, zeros, shift) => {
        const digits = (value < 0n ? -value : value).toString();
        const sign = value < 0n ? '-' : '';
        // value = digits·10^0 = (digits with `shift` moved behind the point)·10^shift, plus `zeros` fraction zeros
        const cut = Math.max(1, digits.length - shift);
        const moved = digits.length - cut;
        const spelled = `${sign}${digits.slice(0, cut)}.${digits.slice(cut)}${'0'.repeat(zeros + 1)}e${moved}`;
        expect(idOfText(value.toString())).toBe(value.toString());
        expect(idOfText(spelled)).toBe(value.toString());
      }),
    );
  });

  it('reads JSON as JSON.parse does (the last of duplicate keys wins), numbers kept as their text', () => {
    const parsed = parseExact('{"id":1,"id":12345678901234567890,"name":"a"}') as {
      id: { value: string };
      name: string;
    };
    expect(parsed.id.value).toBe('12345678901234567890');
    expect(parsed.name).toBe('a');
  });
});

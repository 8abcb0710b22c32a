import { isLosslessNumber, parse as parseLossless } from 'lossless-json';

/** Integral ids of more digits than this are not ids (the log holds ids of at most 255 characters). */
export const MAX_ID_DIGITS = 255;

const MAX_EXPONENT = 1000;
const JSON_NUMBER = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * The one reading of a resource id (docs/reference.md §4, docs/upstream.md), used by
 * ingress, the projector's fold, reconcile and — as the SQL function `menu_sync_canonical_id(jsonb)`
 * — by every statement that reads `included`: a JSON string is the id as it is; a JSON number that
 * is integral is its exact integer in decimal (`1.0`, `1e0` and `1` are all "1"; `-0` is "0"),
 * read from the number's own text (`JsonNumberText`, see parseExact) where precision matters; any
 * other value (a fraction, an integer of more than 255 digits or written with an exponent beyond ±1000, null, an object …) is no id: undefined.
 * Pure.
 */
export function canonicalId(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (isLosslessNumber(value)) return integerText(value.value);
  if (typeof value === 'number') return Number.isInteger(value) ? integerText(BigInt(value).toString()) : undefined;
  return undefined;
}

/** The exact integer a JSON number text denotes, in decimal, or undefined when it is not an integer (of at most 255 digits). */
export function integerText(text: string): string | undefined {
  const match = JSON_NUMBER.exec(text);
  if (match === null) return undefined;
  const [, sign, whole, fraction = '', exponentText = '0'] = match;
  let digits = (whole + fraction).replace(/^0+/, '');
  if (digits === '') return '0';
  // The value is digits × 10^exponent; trailing zeros of the digits move into the exponent.
  const trailing = digits.length - digits.replace(/0+$/, '').length;
  digits = digits.slice(0, digits.length - trailing);
  // Beyond what PostgreSQL's numeric (hence jsonb) can hold at all.
  if (Math.abs(Number(exponentText)) > MAX_EXPONENT) return undefined;
  const exponent = Number(exponentText) - fraction.length + trailing;
  if (exponent < 0 || digits.length + exponent > MAX_ID_DIGITS) return undefined;
  return `${sign}${digits}${'0'.repeat(exponent)}`;
}

/**
 * JSON parsed as JSON.parse does (the last of duplicate keys wins), except that every number is
 * kept as its text (a lossless-json LosslessNumber): for reading ids exactly when some are numbers.
 */
export function parseExact(text: string): unknown {
  return parseLossless(text, null, { onDuplicateKey: ({ newValue }) => newValue });
}

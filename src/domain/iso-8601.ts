/** An ISO 8601 date and time with its offset (fractions to nanoseconds), or, where allowed, a date alone. */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?)$/;
const DATE_ALONE = /^\d{4}-\d{2}-\d{2}$/;

/**
 * The one reading of an ISO 8601 text (event times, `as_of`, `updated_since`): true when `value` is
 * a date and time with an offset (or, with `dateAlone`, a date alone) that names a real instant.
 */
export function isIso8601(value: unknown, { dateAlone = false } = {}): value is string {
  if (typeof value !== 'string') return false;
  return (DATE_TIME.test(value) || (dateAlone && DATE_ALONE.test(value))) && !Number.isNaN(Date.parse(value));
}

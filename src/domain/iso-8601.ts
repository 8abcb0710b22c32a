/** An ISO 8601 date and time with its offset (fractions to nanoseconds), or, where allowed, a date alone. */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-](\d{2})(:?\d{2})?)$/;
const DATE_ALONE = /^(\d{4})-(\d{2})-(\d{2})$/;

/**
 * The one reading of an ISO 8601 text (event times, `as_of`, `updated_since`): true when `value` is
 * a date and time with an offset (or, with `dateAlone`, a date alone) that names a real instant.
 * Each field must be in its range, the day one its month has: `Date.parse` alone rolls
 * `2024-02-30` over to 1 March, which PostgreSQL refuses, so one reading would differ from the other.
 * `24:00` (and `24:00:00`, with zero fractions) is the end of the day, as ISO 8601 and PostgreSQL read it.
 */
export function isIso8601(value: unknown, { dateAlone = false } = {}): value is string {
  if (typeof value !== 'string') return false;
  const time = DATE_TIME.exec(value);
  if (time !== null) {
    const [, year, month, day, hour, minute, second = '0', fraction = '', , offsetHour = '0', offsetMinute = ''] = time;
    const endOfDay = hour === '24' && Number(minute) === 0 && Number(second) === 0 && !/[1-9]/.test(fraction);
    return (
      realDay(year, month, day) &&
      (Number(hour) <= 23 || endOfDay) &&
      Number(minute) <= 59 &&
      Number(second) <= 59 &&
      Number(offsetHour) <= 23 &&
      Number(offsetMinute.replace(':', '') || '0') <= 59 &&
      !Number.isNaN(Date.parse(value))
    );
  }
  const date = dateAlone ? DATE_ALONE.exec(value) : null;
  return date !== null && realDay(date[1], date[2], date[3]) && !Number.isNaN(Date.parse(value));
}

function realDay(year: string, month: string, day: string): boolean {
  const m = Number(month);
  const d = Number(day);
  // Day 0 of the next month is the last day of this one (UTC, so no time zone moves it).
  return m >= 1 && m <= 12 && d >= 1 && d <= new Date(Date.UTC(Number(year), m, 0)).getUTCDate();
}

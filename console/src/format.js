const relative = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });
const UNITS = [
  ['day', 86400],
  ['hour', 3600],
  ['minute', 60],
  ['second', 1],
];

/** "in 2 hours", "3 minutes ago". */
export function fromNow(iso, now = Date.now()) {
  if (!iso) return '—';
  const seconds = (new Date(iso).getTime() - now) / 1000;
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size || unit === 'second') return relative.format(Math.round(seconds / size), unit);
  }
  return '';
}

const dateTime = new Intl.DateTimeFormat('en-GB', { dateStyle: 'medium', timeStyle: 'medium' });
export const when = (iso) => (iso ? dateTime.format(new Date(iso)) : '—');

/** Minor units (pence, cents) → "£6.50". */
export function money(minor, currency) {
  if (typeof minor !== 'number') return String(minor);
  try {
    return new Intl.NumberFormat('en-GB', { style: 'currency', currency }).format(minor / 100);
  } catch {
    return `${(minor / 100).toFixed(2)} ${currency}`;
  }
}

export const count = (n) => (typeof n === 'number' ? n.toLocaleString('en-GB') : '—');

/** "1 product", "7 products", "1,024 events": a count and its noun, with the space between them. */
export const counted = (n, noun) => `${count(n)} ${n === 1 ? noun : `${noun}s`}`;

export function duration(ms) {
  if (typeof ms !== 'number') return '—';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** "12.1 KiB", "3.4 GiB": a size in bytes, binary units. */
export function bytes(n) {
  if (typeof n !== 'number') return '—';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

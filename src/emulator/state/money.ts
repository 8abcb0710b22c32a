const SYMBOLS: Record<string, string> = { GBP: '£', EUR: '€', USD: '$', AUD: 'A$', CAD: 'C$', JPY: '¥', CHF: 'CHF ' };
const ZERO_DECIMAL = new Set(['JPY', 'KRW']);

/** The spec's Money object: cents, a display string with the currency symbol, and the ISO code. */
export function money(cents: number, currency: string): Record<string, unknown> {
  const amount = ZERO_DECIMAL.has(currency) ? String(cents) : (Math.abs(cents) / 100).toFixed(2);
  const symbol = SYMBOLS[currency] ?? `${currency} `;
  return { cents, format: `${cents < 0 ? '-' : ''}${symbol}${amount}`, currency: { iso_code: currency } };
}

/** A currency-keyed money map (base_cost, cost_adjustment). */
export function moneyMap(prices: Record<string, number>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(prices).map(([currency, cents]) => [currency, money(cents, currency)]));
}

/** The cents of one currency in a money map, or undefined when it has no price in that currency. */
export function centsIn(map: unknown, currency: string): number | undefined {
  const entry = (map as Record<string, { cents?: unknown }> | undefined)?.[currency];
  return typeof entry?.cents === 'number' ? entry.cents : undefined;
}

/**
 * A money map from control-API input: `{"GBP": 450}` or the spec's full shape `{"GBP": {"cents": 450, …}}`.
 * Returns an error message instead when the input is neither.
 */
export function parseMoneyMap(input: unknown): Record<string, unknown> | string {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    return 'must be an object keyed by currency code';
  const prices: Record<string, number> = {};
  for (const [currency, value] of Object.entries(input)) {
    if (!/^[A-Z]{3}$/.test(currency))
      return `has a key ${JSON.stringify(currency)} that is not an ISO 4217 currency code`;
    const cents = typeof value === 'object' && value !== null ? (value as { cents?: unknown }).cents : value;
    if (typeof cents !== 'number' || !Number.isInteger(cents))
      return `.${currency} must be integer cents or a Money object with integer cents`;
    prices[currency] = cents;
  }
  return moneyMap(prices);
}

import { InvalidArgumentError } from 'commander';
import { PROJECTIONS } from '../projection/projection-definitions.js';

/** What `--projection` takes. */
export const PROJECTION_NAMES = ['all', ...PROJECTIONS.map((projection) => projection.name)].join('|');

/** The one reading of an integer flag: decimal digits only, from `min` to `max` (commander prints the error and exits 1). */
export function integerOption(value: string, flag: string, min: number, max: number): number {
  const parsed = Number(value);
  if (!/^\d{1,16}$/.test(value) || parsed < min || parsed > max) {
    throw new InvalidArgumentError(`${flag} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return parsed;
}

/** `--connection <id>`: an id from GET /api/v1/connections. */
export function connectionOption(value: string): number {
  return integerOption(value, '--connection', 1, Number.MAX_SAFE_INTEGER);
}

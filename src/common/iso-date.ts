import { Transform } from 'class-transformer';
import { isIso8601 } from '../domain/iso-8601.js';

/** An ISO 8601 query value as a Date; undefined for anything else. */
export function isoInstant(value: unknown): Date | undefined {
  return isIso8601(value, { dateAlone: true }) ? new Date(value) : undefined;
}

/** Turns an ISO 8601 query value into a Date; anything else stays as is and fails @IsDate. */
export const IsoDate = () => Transform(({ value }: { value: unknown }) => isoInstant(value) ?? value);

import { Transform } from 'class-transformer';
import { isIso8601 } from '../domain/iso-8601.js';

/** Turns an ISO 8601 query value into a Date; anything else stays as is and fails @IsDate. */
export const IsoDate = () =>
  Transform(({ value }: { value: unknown }) =>
    isIso8601(value, { dateAlone: true }) ? new Date(value) : value);

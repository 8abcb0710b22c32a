import { Transform } from 'class-transformer';

const ISO_8601 = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?))?$/;

/** Turns an ISO 8601 query value into a Date; anything else stays as is and fails @IsDate. */
export const IsoDate = () =>
  Transform(({ value }: { value: unknown }) =>
    typeof value === 'string' && ISO_8601.test(value) && !Number.isNaN(Date.parse(value)) ? new Date(value) : value);

import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';

export const toInt = ({ value }: { value: unknown }) =>
  typeof value === 'string' && /^\d{1,15}$/.test(value) ? Number(value) : value;

export class PageQuery {
  @IsOptional()
  @Transform(toInt)
  @IsInt({ message: 'limit must be an integer from 1 to 1000' })
  @Min(1, { message: 'limit must be an integer from 1 to 1000' })
  @Max(1000, { message: 'limit must be an integer from 1 to 1000' })
  limit = 100;
}

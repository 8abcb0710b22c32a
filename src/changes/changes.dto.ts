import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { PageQuery, toInt } from '../common/pagination.js';
import { IsResourceTypes } from '../common/resource-types.validator.js';
import { RESOURCE_TYPE_NAMES } from '../domain/resource-type-names.js';
import { CHANGE_CURSOR, MinCursor } from './min-cursor.js';

/** `type` takes resource types in the singular (`product`); a plural is refused, naming the singular. */
export const TYPE_NAMES: Record<string, string> = Object.fromEntries(RESOURCE_TYPE_NAMES.map((type) => [type, type]));

const list = ({ value }: { value: unknown }) =>
  typeof value === 'string' ? value.split(',').map((item) => item.trim()) : value;

export class ChangesQuery extends PageQuery {
  @ApiPropertyOptional({
    description:
      'next_cursor of the previous page, an SSE id, or a changes_cursor of /menu or a list; absent: from the start of the log',
  })
  @IsOptional()
  @Matches(CHANGE_CURSOR, { message: 'after must be a cursor given out by this daemon' })
  after?: string;

  @MinCursor()
  min_cursor?: string;

  @ApiPropertyOptional({ description: 'resource types, comma-separated (product, collection, …)' })
  @IsOptional()
  @Transform(list)
  @IsResourceTypes('type')
  type?: string[];

  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(255)
  owner_id?: string;

  @ApiPropertyOptional({ description: 'seconds (0–60) to wait for a first change when there is none yet', default: 0 })
  @IsOptional()
  @Transform(toInt)
  @IsInt({ message: 'wait must be an integer number of seconds from 0 to 60' })
  @Min(0, { message: 'wait must be an integer number of seconds from 0 to 60' })
  @Max(60, { message: 'wait must be an integer number of seconds from 0 to 60' })
  wait = 0;
}

import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, MaxLength, Min } from 'class-validator';
import { PageQuery, toInt } from '../common/pagination.js';

/** `before=latest` pages newest first from the newest entry; otherwise a position or id. */
const toBefore = ({ value }: { value: unknown }) => (value === 'latest' ? Number.MAX_SAFE_INTEGER : toInt({ value }));

export class EventsQuery extends PageQuery {
  @ApiPropertyOptional({ description: 'Return entries after this position' })
  @IsOptional()
  @Transform(toInt)
  @IsInt({ message: 'after must be a non-negative integer' })
  @Min(0, { message: 'after must be a non-negative integer' })
  after = 0;

  @ApiPropertyOptional({
    description: 'Return entries before this position, newest first (latest: from the newest; next_cursor pages on)',
  })
  @IsOptional()
  @Transform(toBefore)
  @IsInt({ message: 'before must be a positive integer or latest' })
  @Min(1, { message: 'before must be a positive integer or latest' })
  before?: number;

  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(100)
  event_type?: string;

  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(100)
  subject_type?: string;

  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(255)
  subject_id?: string;
}

export class QuarantineQuery extends PageQuery {
  @ApiPropertyOptional({ description: 'Return entries after this id' })
  @IsOptional()
  @Transform(toInt)
  @IsInt({ message: 'after must be a non-negative integer' })
  @Min(0, { message: 'after must be a non-negative integer' })
  after = 0;

  @ApiPropertyOptional({
    description: 'Return entries before this id, newest first (latest: from the newest; next_cursor pages on)',
  })
  @IsOptional()
  @Transform(toBefore)
  @IsInt({ message: 'before must be a positive integer or latest' })
  @Min(1, { message: 'before must be a positive integer or latest' })
  before?: number;
}

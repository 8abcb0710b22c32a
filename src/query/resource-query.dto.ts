import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsBoolean, IsDate, IsIn, IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { MinCursor } from '../changes/min-cursor.js';
import { IsoDate } from '../common/iso-date.js';
import { PageQuery } from '../common/pagination.js';

const bool = ({ value }: { value: unknown }) => (value === 'true' ? true : value === 'false' ? false : value);

export class AsOfQuery {
  @ApiPropertyOptional({ description: 'ISO 8601 instant: the state folded from events that occurred up to then' })
  @IsOptional()
  @IsoDate()
  @IsDate({ message: 'as_of must be an ISO 8601 timestamp' })
  as_of?: Date;

  @MinCursor()
  min_cursor?: string;
}

export class ListQuery extends PageQuery {
  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(255)
  owner_id?: string;

  @ApiPropertyOptional({ description: 'ISO 8601: resources whose newest event occurred at or after this instant' })
  @IsOptional()
  @IsoDate()
  @IsDate({ message: 'updated_since must be an ISO 8601 timestamp' })
  updated_since?: Date;

  @ApiPropertyOptional({ default: false })
  @IsOptional()
  @Transform(bool)
  @IsBoolean({ message: 'include_deleted must be true or false' })
  include_deleted = false;

  @ApiPropertyOptional({ description: 'next_cursor of the previous page' })
  @IsOptional()
  @Matches(/^[A-Za-z0-9_-]{1,400}$/, { message: 'cursor must be a next_cursor value' })
  cursor?: string;

  @ApiPropertyOptional()
  @IsOptional()
  @IsoDate()
  @IsDate({ message: 'as_of must be an ISO 8601 timestamp' })
  as_of?: Date;

  @MinCursor()
  min_cursor?: string;
}

export class ProductQuery extends AsOfQuery {
  @ApiPropertyOptional({ enum: ['traits'] })
  @IsOptional()
  @IsIn(['traits'], { message: 'expand must be traits' })
  expand?: 'traits';
}

export class OrderQuery extends AsOfQuery {
  @ApiPropertyOptional({ enum: ['order_products'] })
  @IsOptional()
  @IsIn(['order_products'], { message: 'expand must be order_products' })
  expand?: 'order_products';
}

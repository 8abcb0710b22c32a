import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString } from 'class-validator';
import { PageQuery } from '../common/pagination.js';

/** `GET /api/v1/audit?limit=&before=`: limit 1 to 1000 (default 100), before a next_cursor. */
export class AuditQuery extends PageQuery {
  @ApiPropertyOptional({ description: 'next_cursor of the previous page' })
  @IsOptional()
  @IsString({ message: 'before must be a next_cursor given out by this endpoint' })
  before?: string;
}

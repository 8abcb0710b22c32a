import { Controller, Get, Param, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiPropertyOptional, ApiTags } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { ApiTokenGuard } from '../../common/api-token.guard.js';
import { toInt } from '../../common/pagination.js';
import { SinkAttemptsService } from '../attempts/sink-attempts.service.js';
import { checkId } from './sinks.service.js';

export class AttemptsQuery {
  @ApiPropertyOptional({ description: 'attempts per page, 1 to 1000 (default 50)' })
  @IsOptional()
  @Transform(toInt)
  @IsInt({ message: 'limit must be an integer from 1 to 1000' })
  @Min(1, { message: 'limit must be an integer from 1 to 1000' })
  @Max(1000, { message: 'limit must be an integer from 1 to 1000' })
  limit = 50;

  @ApiPropertyOptional({ description: 'next_cursor of the previous page' })
  @IsOptional()
  @IsString({ message: 'before must be a next_cursor given out by this endpoint' })
  before?: string;
}

@ApiTags('sinks')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/sinks')
export class SinkAttemptsController {
  constructor(private readonly attempts: SinkAttemptsService) {}

  @Get(':id/attempts')
  @ApiOperation({ summary: "A sink's delivery attempts, newest first: the batch, the outcome and the target's answer" })
  list(@Param('id') id: string, @Query() query: AttemptsQuery) {
    checkId(id);
    return this.attempts.page(id, query);
  }
}

import { Controller, DefaultValuePipe, Get, ParseIntPipe, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { ReconcileRepository } from './reconcile.repository.js';

@ApiTags('reconcile')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/reconcile')
export class ReconcileController {
  constructor(private readonly runs: ReconcileRepository) {}

  @Get('runs')
  @ApiOperation({ summary: 'Reconcile run reports, newest first: per store, resources checked, differences by kind, events appended, errors, duration' })
  @ApiQuery({ name: 'limit', required: false, description: '1–100, default 20' })
  @ApiOkResponse({ description: '{"data": [<run>]}' })
  async list(@Query('limit', new DefaultValuePipe(20), ParseIntPipe) limit: number) {
    return { data: await this.runs.listRuns(Math.min(Math.max(limit, 1), 100)) };
  }
}

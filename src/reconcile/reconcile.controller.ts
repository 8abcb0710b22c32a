import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { BadRequestError } from '../common/app-error.js';
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
  @ApiOperation({
    summary:
      'Reconcile run reports, newest first: per store, resources checked, differences by kind, events appended, errors, duration',
  })
  @ApiQuery({ name: 'limit', required: false, description: '1–100, default 20' })
  @ApiOkResponse({ description: '{"data": [<run>]}' })
  async list(@Query('limit') limit?: string) {
    return { data: await this.runs.listRuns(runLimit(limit)) };
  }
}

/** `limit`: 1–100, default 20; anything else is a 400 naming it (docs/reference.md §5: never a silent clamp). */
function runLimit(value: string | undefined): number {
  if (value === undefined) return 20;
  if (!/^\d{1,3}$/.test(value) || Number(value) < 1 || Number(value) > 100)
    throw new BadRequestError('limit must be an integer from 1 to 100', 'limit');
  return Number(value);
}

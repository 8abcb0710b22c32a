import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { BadRequestError } from '../common/app-error.js';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { reconcileProgressJson } from '../observability/status-report.js';
import { ReconcileStoresRepository } from './reconcile-stores.repository.js';
import { ReconcileRepository } from './reconcile.repository.js';

@ApiTags('reconcile')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/reconcile')
export class ReconcileController {
  constructor(
    private readonly runs: ReconcileRepository,
    private readonly stores: ReconcileStoresRepository,
  ) {}

  @Get('runs')
  @ApiOperation({
    summary:
      'Reconcile run reports, newest first (per store: resources checked, differences by kind, events appended, errors, duration), and where the per-store schedule stands',
  })
  @ApiQuery({ name: 'limit', required: false, description: '1–100, default 20' })
  @ApiOkResponse({
    description:
      '{"data": [<run>], "stores_done", "stores_pending", "stores_failing", "next_due_at"}: stores reconciled and not due yet, due or never reconciled, whose last attempt failed (retried with backoff); the soonest due (null: none)',
  })
  async list(@Query('limit') limit?: string) {
    const [data, progress] = await Promise.all([this.runs.listRuns(runLimit(limit)), this.stores.progress()]);
    return { data, ...reconcileProgressJson(progress) };
  }
}

/** `limit`: 1–100, default 20; anything else is a 400 naming it (docs/reference.md §5: never a silent clamp). */
function runLimit(value: string | undefined): number {
  if (value === undefined) return 20;
  if (!/^\d{1,3}$/.test(value) || Number(value) < 1 || Number(value) > 100)
    throw new BadRequestError('limit must be an integer from 1 to 100', 'limit');
  return Number(value);
}

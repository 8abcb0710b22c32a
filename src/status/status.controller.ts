import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { StatusQuery } from './status.dto.js';
import { StatusService } from './status.service.js';

@ApiTags('status')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/status')
export class StatusController {
  constructor(private readonly status: StatusService) {}

  @Get()
  @ApiOperation({
    summary:
      'What `menu-sync status --json` prints: connections, projections, sinks, the last reconcile, the quarantine, and what needs attention',
  })
  report(@Query() query: StatusQuery) {
    return this.status.report(query.lag_threshold);
  }
}

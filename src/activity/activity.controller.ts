import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { ActivityQuery } from './activity.dto.js';
import { ActivityService } from './activity.service.js';

@ApiTags('activity')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/activity')
export class ActivityController {
  constructor(private readonly activity: ActivityService) {}

  @Get()
  @ApiOperation({
    summary:
      'Per minute: events received, changes published, deliveries and failures by sink kind (read and admin tokens; not a token scoped to owners)',
  })
  series(@Query() query: ActivityQuery) {
    return this.activity.series(query);
  }
}

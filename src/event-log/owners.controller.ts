import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { type OwnerScope, TokenScope } from '../common/owner-scope.js';
import { EventLogQueryService } from './event-log-query.service.js';

/** The owners seen in the log and the span of their events (an addition to docs/reference.md §5, for the console). */
@ApiTags('events')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/owners')
export class OwnersController {
  constructor(private readonly events: EventLogQueryService) {}

  @Get()
  list(@TokenScope() scope: OwnerScope) {
    return this.events.owners(scope);
  }
}

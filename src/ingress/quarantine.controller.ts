import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { type OwnerScope, TokenScope } from '../common/owner-scope.js';
import { QuarantineQuery } from '../event-log/event-log.dto.js';
import { QuarantineService } from './quarantine.service.js';

@ApiTags('quarantine')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/quarantine')
export class QuarantineController {
  constructor(private readonly quarantine: QuarantineService) {}

  @Get()
  list(@Query() query: QuarantineQuery, @TokenScope() scope: OwnerScope) {
    return this.quarantine.list(query, scope);
  }
}

import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { AuditLog } from './audit-log.service.js';
import { AuditReaderGuard } from './audit-reader.guard.js';
import { AuditQuery } from './audit.dto.js';

@ApiTags('audit')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard, AuditReaderGuard)
@Controller('api/v1/audit')
export class AuditController {
  constructor(private readonly audit: AuditLog) {}

  @Get()
  @ApiOperation({
    summary: 'The writes that changed something, newest first: when, which token, what, on what, from where (admin)',
  })
  list(@Query() query: AuditQuery) {
    return this.audit.page(query);
  }
}

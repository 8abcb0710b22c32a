import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { ProjectionStatusService } from './projection-status.service.js';

@ApiTags('projections')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/projections')
export class ProjectionsController {
  constructor(private readonly status: ProjectionStatusService) {}

  @Get()
  list() {
    return this.status.list();
  }

  @Get('parked')
  parked() {
    return this.status.parked();
  }
}

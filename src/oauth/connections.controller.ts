import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { ConnectionsService } from './connections.service.js';

@ApiTags('connections')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/connections')
export class ConnectionsController {
  constructor(private readonly connections: ConnectionsService) {}

  @Get()
  @ApiOperation({
    summary: 'Connected accounts with their token state and subscriptions (never a token or a webhook key)',
  })
  @ApiOkResponse({ description: '{"data": [<connection>]}' })
  list() {
    return this.connections.list();
  }
}

import { Controller, Get, Param, Query, Req, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiForbiddenResponse, ApiGoneResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { ForbiddenError } from '../common/app-error.js';
import { type OwnerScope, TokenScope } from '../common/owner-scope.js';
import { PositivePipe } from '../common/position.pipe.js';
import { EventsQuery } from './event-log.dto.js';
import { EventLogQueryService } from './event-log-query.service.js';

const ARCHIVED =
  'An archived position (docs/reference.md §8): problem+json naming the horizon (`archived_before`) and the file (`archive_file`)';

@ApiTags('events')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/events')
export class EventsController {
  constructor(
    private readonly events: EventLogQueryService,
    private readonly guard: ApiTokenGuard,
  ) {}

  @Get()
  list(@Query() query: EventsQuery, @TokenScope() scope: OwnerScope) {
    return this.events.list(query, scope);
  }

  @Get(':position')
  @ApiGoneResponse({ description: ARCHIVED })
  async get(
    @Param('position', new PositivePipe()) position: number,
    @TokenScope() scope: OwnerScope,
    @Res() reply: FastifyReply,
  ) {
    await reply.header('Content-Type', 'application/json; charset=utf-8').send(await this.events.get(position, scope));
  }

  @Get(':position/raw')
  @ApiOperation({ summary: 'The exact bytes received, webhook key included: admin tokens only' })
  @ApiGoneResponse({ description: ARCHIVED })
  @ApiForbiddenResponse({
    description: 'A read token: the bytes hold the webhook key, which would let it forge deliveries',
  })
  async raw(
    @Param('position', new PositivePipe()) position: number,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    if (this.guard.role(request) !== 'admin') {
      throw new ForbiddenError(
        'The exact bytes of a delivery hold its webhook key: only an admin token may read them. GET /api/v1/events/{position} gives the payload with the key redacted.',
      );
    }
    const { contentType, body } = await this.events.raw(position);
    await reply.header('Content-Type', contentType).send(body);
  }
}

import { Controller, Get, Param, Query, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { PositivePipe } from '../common/position.pipe.js';
import { EventsQuery } from './event-log.dto.js';
import { EventLogQueryService } from './event-log-query.service.js';

@ApiTags('events')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/events')
export class EventsController {
  constructor(private readonly events: EventLogQueryService) {}

  @Get()
  list(@Query() query: EventsQuery) {
    return this.events.list(query);
  }

  @Get(':position')
  async get(@Param('position', new PositivePipe()) position: number, @Res() reply: FastifyReply) {
    await reply.header('Content-Type', 'application/json; charset=utf-8').send(await this.events.get(position));
  }

  @Get(':position/raw')
  async raw(@Param('position', new PositivePipe()) position: number, @Res() reply: FastifyReply) {
    const { contentType, body } = await this.events.raw(position);
    await reply.header('Content-Type', contentType).send(body);
  }
}

import { Controller, Delete, Get, HttpCode, Param, Patch, Post, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Actor, type AuditActor } from '../../audit/audit-actor.js';
import { ApiTokenGuard } from '../../common/api-token.guard.js';
import { JsonBody, jsonBodyValidation } from '../../common/json-body.decorator.js';
import { CreateSinkDto, ListSinksQuery, ReplaySinkDto, UpdateSinkDto } from './sinks.dto.js';
import { SinksService } from './sinks.service.js';

@ApiTags('sinks')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/sinks')
export class SinksController {
  constructor(private readonly sinks: SinksService) {}

  @Post()
  @ApiOperation({
    summary: "Create a push sink (http or nats); an http sink's whsec_ secret is shown in this answer only",
  })
  create(@JsonBody(jsonBodyValidation) dto: CreateSinkDto, @Actor() actor: AuditActor) {
    return this.sinks.create(dto, actor);
  }

  @Get()
  @ApiOperation({
    summary: 'A page of sinks with their cursor, state, lag, last success, last error and next attempt',
  })
  list(@Query() query: ListSinksQuery) {
    return this.sinks.list(query);
  }

  @Get('summary')
  @ApiOperation({ summary: 'Sinks by state and by kind, the failing ones and the most lagging' })
  summary() {
    return this.sinks.summary();
  }

  @Get(':id')
  get(@Param('id') id: string) {
    return this.sinks.get(id);
  }

  @Patch(':id')
  @ApiOperation({ summary: 'Change a sink; {"state":"active"} enables a disabled one again' })
  update(@Param('id') id: string, @JsonBody(jsonBodyValidation) dto: UpdateSinkDto, @Actor() actor: AuditActor) {
    return this.sinks.update(id, dto, actor);
  }

  @Delete(':id')
  @HttpCode(204)
  remove(@Param('id') id: string, @Actor() actor: AuditActor) {
    return this.sinks.remove(id, actor);
  }

  @Post(':id/replay')
  @HttpCode(200)
  @ApiOperation({ summary: 'Deliver again from {"from":"start"} or after a changes cursor' })
  replay(@Param('id') id: string, @JsonBody(jsonBodyValidation) dto: ReplaySinkDto, @Actor() actor: AuditActor) {
    return this.sinks.replay(id, dto, actor);
  }

  @Post(':id/rotate-secret')
  @HttpCode(200)
  @ApiOperation({ summary: 'A new whsec_ secret (shown in this answer only); both are signed with for 24 h' })
  rotateSecret(@Param('id') id: string, @Actor() actor: AuditActor) {
    return this.sinks.rotateSecret(id, actor);
  }
}

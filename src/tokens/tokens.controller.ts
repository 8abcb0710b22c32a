import { Actor, type AuditActor } from '../audit/audit-actor.js';
import { Controller, Delete, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AdminTokenGuard } from '../common/api-token.guard.js';
import { JsonBody, jsonBodyValidation } from '../common/json-body.decorator.js';
import { CreateTokenDto, ListTokensQuery } from './tokens.dto.js';
import { TokensService } from './tokens.service.js';

/** API tokens kept in the database (docs/reference.md §12): admin tokens only, reads included. */
@ApiTags('tokens')
@ApiBearerAuth()
@UseGuards(AdminTokenGuard)
@Controller('api/v1/tokens')
export class TokensController {
  constructor(private readonly tokens: TokensService) {}

  @Post()
  @ApiOperation({ summary: 'Make an API token; its secret (mst_…) is shown in this answer only' })
  create(@JsonBody(jsonBodyValidation) dto: CreateTokenDto, @Actor() actor: AuditActor) {
    return this.tokens.create(dto, actor);
  }

  @Get()
  @ApiOperation({ summary: 'A page of the stored tokens, oldest first, without their secrets' })
  list(@Query() query: ListTokensQuery) {
    return this.tokens.list(query);
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Revoke a stored token: every process refuses it within 5 s' })
  revoke(@Param('id') id: string, @Actor() actor: AuditActor) {
    return this.tokens.revoke(id, actor);
  }
}

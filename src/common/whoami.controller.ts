import { Controller, Get, Module, Req, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import type { ApiRole } from '../config/app-config.js';
import { ApiTokenGuard } from './api-token.guard.js';

/** What the presented token may do (docs/reference.md §12): the console hides what a read token may not do. */
@ApiTags('access')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1/whoami')
export class WhoamiController {
  constructor(private readonly guard: ApiTokenGuard) {}

  @Get()
  @ApiOperation({
    summary:
      'The role of the bearer token, "read" (may only read) or "admin" (may do everything), and the owners it sees (null: every owner)',
  })
  @ApiOkResponse({ schema: { example: { role: 'read', owner_ids: ['owner-1'] } } })
  whoami(@Req() request: FastifyRequest): { role: ApiRole; owner_ids: readonly string[] | null } {
    const { role, ownerIds } = this.guard.principal(request);
    return { role, owner_ids: ownerIds };
  }
}

@Module({ controllers: [WhoamiController], providers: [ApiTokenGuard] })
export class AccessModule {}

import { Controller, Get, Header, Query, Redirect, Req, UseGuards } from '@nestjs/common';
import { ApiFoundResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { oauthCallbackActor } from '../audit/audit-actor.js';
import { ConnectStartGuard } from '../common/api-token.guard.js';
import { ConnectService } from './connect.service.js';
import type { AuthorizationCallback } from './connect.service.js';

/**
 * The browser side of the connect flow (docs/reference.md §6): starting it takes the API token (or a
 * loopback client when none is set); the callback takes none, its single-use state protects it.
 */
@ApiTags('auth')
@Controller('auth')
export class AuthController {
  constructor(private readonly connect: ConnectService) {}

  @Get('connect')
  @UseGuards(ConnectStartGuard)
  @ApiOperation({
    summary:
      'Start connecting an upstream account: redirects to the authorization server (API token as bearer or ?api_token=)',
  })
  @ApiFoundResponse({ description: 'Redirect to {auth_url}/oauth/authorize' })
  @Header('Cache-Control', 'no-store')
  @Redirect(undefined, 302)
  start() {
    return this.connect.start();
  }

  @Get('callback')
  @ApiOperation({ summary: 'Where the authorization server sends the user back: stores the connection and subscribes' })
  @ApiOkResponse({ description: '{"data": <connection>}' })
  @Header('Cache-Control', 'no-store')
  async callback(@Query() query: AuthorizationCallback, @Req() request: FastifyRequest) {
    return { data: await this.connect.complete(query, oauthCallbackActor(request)) };
  }
}

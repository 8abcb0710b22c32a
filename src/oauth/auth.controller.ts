import { Controller, Get, Header, Query, Redirect, Req, Res, UseGuards } from '@nestjs/common';
import { ApiFoundResponse, ApiOkResponse, ApiOperation, ApiSeeOtherResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Actor, oauthCallbackActor } from '../audit/audit-actor.js';
import type { AuditActor } from '../audit/audit-actor.js';
import { ConnectStartGuard } from '../common/api-token.guard.js';
import { answerCallback } from './callback-answer.js';
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
  start(@Actor() actor: AuditActor) {
    return this.connect.start(undefined, actor);
  }

  @Get('callback')
  @ApiOperation({
    summary:
      'Where the authorization server sends the user back: stores the connection (or gives an owner already connected the new tokens) and subscribes',
  })
  @ApiOkResponse({ description: '{"data": <connection>, "meta": {"outcome": "created" | "replaced", "retired": […]}}' })
  @ApiSeeOtherResponse({
    description: 'A browser (Accept prefers text/html): to the console page /console/#/connected?…',
  })
  async callback(@Query() query: AuthorizationCallback, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    await answerCallback(this.connect.complete(query, oauthCallbackActor(request)), request, reply);
  }
}

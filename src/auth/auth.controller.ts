import { Controller, Get, Header, Query, Redirect } from '@nestjs/common';
import { ApiFoundResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ConnectService } from './connect.service.js';
import type { AuthorizationCallback } from './connect.service.js';

/** The browser side of the connect flow (CONTRACT §6): no API token, the state protects the callback. */
@ApiTags('auth')
@Controller('auth')
export class AuthController {
  constructor(private readonly connect: ConnectService) {}

  @Get('connect')
  @ApiOperation({ summary: 'Start connecting an upstream account: redirects to the authorization server' })
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
  async callback(@Query() query: AuthorizationCallback) {
    return { data: await this.connect.complete(query) };
  }
}

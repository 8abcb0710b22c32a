import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import { OAuthServer } from './oauth-server.service.js';

/** Control endpoints of the OAuth server, for tests and demos. */
@Controller('_emulator')
export class OAuthControlController {
  constructor(private readonly oauth: OAuthServer) {}

  @Post('tokens/expire')
  @HttpCode(200)
  expireTokens() {
    return { expired: this.oauth.expireAccessTokens() };
  }

  @Get('token_requests')
  tokenRequests() {
    return { data: this.oauth.tokenRequests() };
  }
}

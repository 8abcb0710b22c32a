import { Body, Controller, Get, Header, Headers, HttpCode, Post, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { OAuthServer } from './oauth-server.service.js';

/** The platform's authorization and token endpoints (spec: Endpoints 1 and 2), and Doorkeeper's token info. */
@Controller('oauth')
export class OAuthController {
  constructor(private readonly oauth: OAuthServer) {}

  @Get('authorize')
  authorize(@Query() query: Record<string, unknown>, @Res() reply: FastifyReply) {
    const outcome = this.oauth.authorize(query);
    if ('redirect' in outcome) return reply.header('Cache-Control', 'no-store').redirect(outcome.redirect, 302);
    return reply.header('Cache-Control', 'no-store').type('text/html; charset=utf-8').send(codePage(outcome.code));
  }

  @Post('token')
  @HttpCode(200)
  @Header('Cache-Control', 'no-store')
  @Header('Pragma', 'no-cache')
  token(@Body() form: unknown, @Headers('authorization') authorization: string | undefined) {
    return this.oauth.token(form, authorization);
  }

  /** Doorkeeper's token introspection (not in the spec; the platform is built on Doorkeeper). */
  @Get('token/info')
  @Header('Cache-Control', 'no-store')
  tokenInfo(@Headers('authorization') authorization: string | undefined, @Query('access_token') accessToken: unknown) {
    return this.oauth.tokenInfo(authorization, accessToken);
  }
}

/** The out-of-band page: the user copies the code from it into the application. */
function codePage(code: string): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Authorization code</title></head>
<body>
<h1>Authorization code</h1>
<p>Copy this code into the application:</p>
<p><code id="code">${escapeHtml(code)}</code></p>
</body>
</html>
`;
}

function escapeHtml(text: string): string {
  const entities: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  return text.replace(/[&<>"']/g, (char) => entities[char]);
}

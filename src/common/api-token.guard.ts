import { timingSafeEqual, createHash } from 'node:crypto';
import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { AppConfig } from '../config/app-config.js';
import { UnauthorizedError } from './app-error.js';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * `/api` access (CONTRACT §5): a bearer token from API_TOKENS; with none configured, loopback
 * clients only. Tokens are compared as digests in constant time.
 */
@Injectable()
export class ApiTokenGuard implements CanActivate {
  private readonly tokens: Buffer[];

  constructor(config: AppConfig) {
    this.tokens = config.API_TOKENS.map(digest);
  }

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<FastifyRequest>();
    if (this.tokens.length === 0) {
      if (LOOPBACK.test(request.socket.remoteAddress ?? '')) return true;
      throw new UnauthorizedError('API_TOKENS is not set, so the API answers loopback clients only.');
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    if (!match) throw new UnauthorizedError('A bearer token is required (Authorization: Bearer <token>).');
    const presented = digest(match[1]);
    if (!this.tokens.some((token) => timingSafeEqual(token, presented))) {
      throw new UnauthorizedError('The bearer token is not valid.');
    }
    return true;
  }
}

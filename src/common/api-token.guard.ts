import { timingSafeEqual, createHash } from 'node:crypto';
import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { AppConfig } from '../config/app-config.js';
import { UnauthorizedError } from './app-error.js';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * `/api` access (docs/reference.md §5): a bearer token from API_TOKENS; with none configured, loopback
 * clients only. Tokens are compared as digests in constant time.
 */
@Injectable()
export class ApiTokenGuard implements CanActivate {
  private readonly tokens: Buffer[];

  constructor(config: AppConfig) {
    this.tokens = config.API_TOKENS.map(digest);
  }

  canActivate(context: ExecutionContext): boolean {
    this.check(context.switchToHttp().getRequest<FastifyRequest>());
    return true;
  }

  /** Throws UnauthorizedError unless the request may use the API (also for routes outside Nest's pipeline). */
  check(request: FastifyRequest): void {
    if (this.tokens.length === 0) {
      if (LOOPBACK.test(request.socket.remoteAddress ?? '')) return;
      throw new UnauthorizedError('API_TOKENS is not set, so the API answers loopback clients only.');
    }
    const token = this.presented(request);
    if (token === undefined) throw new UnauthorizedError('A bearer token is required (Authorization: Bearer <token>).');
    const presented = digest(token);
    if (!this.tokens.some((candidate) => timingSafeEqual(candidate, presented))) {
      throw new UnauthorizedError('The bearer token is not valid.');
    }
  }

  protected presented(request: FastifyRequest): string | undefined {
    return /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1];
  }
}

/**
 * Starting a connection (`GET /auth/connect`) is an operator's act: the `/api` rule, with the token
 * also taken from `?api_token=` since a browser following a link sends no header. Without it,
 * anyone reaching the port could link their own account and have its data logged for good.
 */
@Injectable()
export class ConnectStartGuard extends ApiTokenGuard {
  protected override presented(request: FastifyRequest): string | undefined {
    const query = (request.query as Record<string, unknown> | undefined)?.api_token;
    return super.presented(request) ?? (typeof query === 'string' && query !== '' ? query : undefined);
  }
}

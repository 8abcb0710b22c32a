import { timingSafeEqual, createHash } from 'node:crypto';
import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { ApiRole, AppConfig } from '../config/app-config.js';
import { ForbiddenError, UnauthorizedError } from './app-error.js';
import type { Principal } from './principal.js';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;
const READS = new Set(['GET', 'HEAD']);
const LOOPBACK_PRINCIPAL: Principal = {
  role: 'admin',
  ownerIds: null,
  id: 'loopback',
  name: 'a loopback client (API_TOKENS unset)',
};

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * `/api` access (docs/reference.md §5, §12): a bearer token from API_TOKENS; with none configured, loopback
 * clients only. Tokens are compared as digests in constant time. A `read:` token may only read
 * (GET, HEAD); anything else it asks is a 403 that changes nothing.
 */
@Injectable()
export class ApiTokenGuard implements CanActivate {
  private readonly tokens: Array<{ digest: Buffer; principal: Principal }>;

  constructor(config: AppConfig) {
    this.tokens = config.apiTokens.map(({ token, role }, index) => ({
      digest: digest(token),
      principal: { role, ownerIds: null, id: `api_tokens:${index + 1}`, name: `API_TOKENS entry ${index + 1}` },
    }));
  }

  canActivate(context: ExecutionContext): boolean {
    this.check(context.switchToHttp().getRequest<FastifyRequest>());
    return true;
  }

  /**
   * Throws UnauthorizedError unless the request may use the API, ForbiddenError if its token may
   * not do what it asks (also for routes outside Nest's pipeline).
   */
  check(request: FastifyRequest): void {
    if (this.principal(request).role === 'read' && !this.readOnly(request)) {
      throw new ForbiddenError(
        'This token may only read (API_TOKENS entry read:…): use an admin token to change anything.',
      );
    }
  }

  /** The role of the request's token (admin for loopback clients when API_TOKENS is not set); throws UnauthorizedError. */
  role(request: FastifyRequest): ApiRole {
    return this.principal(request).role;
  }

  /** Who the request's token is, also kept on the request (`request.principal`); throws UnauthorizedError. */
  principal(request: FastifyRequest): Principal {
    if (request.principal !== undefined) return request.principal;
    const found = this.find(request);
    request.principal = found;
    return found;
  }

  private find(request: FastifyRequest): Principal {
    if (this.tokens.length === 0) {
      if (LOOPBACK.test(request.socket.remoteAddress ?? '')) return LOOPBACK_PRINCIPAL;
      throw new UnauthorizedError('API_TOKENS is not set, so the API answers loopback clients only.');
    }
    const token = this.presented(request);
    if (token === undefined) throw new UnauthorizedError('A bearer token is required (Authorization: Bearer <token>).');
    const presented = digest(token);
    // Every candidate is compared, so the time taken does not tell which one matched.
    let found: Principal | undefined;
    for (const candidate of this.tokens) {
      if (timingSafeEqual(candidate.digest, presented) && found?.role !== 'admin') found = candidate.principal;
    }
    if (found === undefined) throw new UnauthorizedError('The bearer token is not valid.');
    return found;
  }

  /** What a read token may do: read. */
  protected readOnly(request: FastifyRequest): boolean {
    return READS.has(request.method);
  }

  protected presented(request: FastifyRequest): string | undefined {
    return /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1];
  }
}

/**
 * Starting a connection (`GET /auth/connect`) is an operator's act: the `/api` rule, with the token
 * also taken from `?api_token=` since a browser following a link sends no header. Without it,
 * anyone reaching the port could link their own account and have its data logged for good. A read
 * token may not: it links an account, though by a GET.
 */
@Injectable()
export class ConnectStartGuard extends ApiTokenGuard {
  protected override presented(request: FastifyRequest): string | undefined {
    const query = (request.query as Record<string, unknown> | undefined)?.api_token;
    return super.presented(request) ?? (typeof query === 'string' && query !== '' ? query : undefined);
  }

  protected override readOnly(): boolean {
    return false;
  }
}

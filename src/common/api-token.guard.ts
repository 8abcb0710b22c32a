import { timingSafeEqual, createHash } from 'node:crypto';
import { CanActivate, ExecutionContext, Inject, Injectable, Optional } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { ApiRole, AppConfig } from '../config/app-config.js';
import { ForbiddenError, UnauthorizedError } from './app-error.js';
import { checkOwnerScope } from './owner-scope.js';
import type { Principal } from './principal.js';
import { STORED_TOKENS } from './stored-tokens.js';
import type { StoredTokens } from './stored-tokens.js';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;
const READS = new Set(['GET', 'HEAD']);
const LOOPBACK_PRINCIPAL: Principal = {
  role: 'admin',
  ownerIds: null,
  id: 'loopback',
  name: 'a loopback client (no API_TOKENS, no stored token)',
};

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * `/api` access (docs/reference.md §5, §12): a bearer token from API_TOKENS or one stored in the
 * database (`/api/v1/tokens`); while there is neither, loopback clients only. API_TOKENS are
 * compared as digests in constant time. A read token may only read (GET, HEAD); anything else it
 * asks is a 403 that changes nothing.
 */
@Injectable()
export class ApiTokenGuard implements CanActivate {
  private readonly tokens: Array<{ digest: Buffer; principal: Principal }>;

  /** `stored` is absent only where no store is wired (then API_TOKENS alone count). */
  constructor(
    config: AppConfig,
    @Optional() @Inject(STORED_TOKENS) private readonly stored?: StoredTokens,
  ) {
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
    const principal = this.principal(request);
    if (principal.role === 'read' && !this.readOnly(request)) {
      throw new ForbiddenError('This token may only read (a read token): use an admin token for this.');
    }
    if (principal.ownerIds !== null) checkOwnerScope(request, principal.ownerIds);
  }

  /** Whether the request's token is scoped to owners (false when it is no valid token: `check` says why). */
  scoped(request: FastifyRequest): boolean {
    try {
      return this.principal(request).ownerIds !== null;
    } catch {
      return false;
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
    if (this.tokens.length === 0 && !(this.stored?.any ?? false)) {
      if (LOOPBACK.test(request.socket.remoteAddress ?? '')) return LOOPBACK_PRINCIPAL;
      throw new UnauthorizedError(
        'Neither API_TOKENS nor a stored token is set, so the API answers loopback clients only.',
      );
    }
    const token = this.presented(request);
    if (token === undefined) throw new UnauthorizedError('A bearer token is required (Authorization: Bearer <token>).');
    const presented = digest(token);
    // Every candidate is compared, so the time taken does not tell which one matched.
    let found: Principal | undefined;
    for (const candidate of this.tokens) {
      if (timingSafeEqual(candidate.digest, presented) && found?.role !== 'admin') found = candidate.principal;
    }
    // A stored token is found by its digest in a map: the lookup's timing can tell at most something
    // of a SHA-256 of the presented text, and a stored secret is 256 random bits, so nothing of it.
    found ??= this.stored?.principal(presented, Date.now());
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

/** Routes for admin tokens only, reads too (`/api/v1/tokens`): a read token gets 403 there. */
@Injectable()
export class AdminTokenGuard extends ApiTokenGuard {
  protected override readOnly(): boolean {
    return false;
  }
}

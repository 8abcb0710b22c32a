import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { ForbiddenError } from './app-error.js';

/** The owners a request's token may see (docs/reference.md §12, Owner scope); null: every owner. */
export type OwnerScope = readonly string[] | null;

/** The reads that take `owner_id`: answered for owners of the scope only. */
const BY_OWNER = /^\/api\/v1\/(menu|changes|collections|products|traits|trait_options|orders|order_products|stores)$/;
/** The reads whose handler keeps to the scope: an entry or resource of another owner is not found. */
const FILTERED =
  /^\/api\/v1\/((collections|products|traits|trait_options|orders|order_products|stores)\/:id|events|events\/:position|quarantine|owners)$/;
const OPEN = new Set(['/api/v1/whoami']);

/**
 * What a token scoped to `ownerIds` may ask: the reads of its owners' data, and `whoami`; anything
 * else (sinks, connections, tokens, the audit log, projections, reconcile runs, the exact bytes of
 * `/raw`) is refused. An `owner_id` outside the scope is refused naming it; absent, a token of one
 * owner reads that owner (set on the query before the route's validation reads it), and one of
 * several owners reads all of them, each handler filtering by `ownerScopeOf`. No parameter widens
 * the scope: the handlers apply it whatever the query says.
 */
export function checkOwnerScope(request: FastifyRequest, ownerIds: readonly string[]): void {
  const route = request.routeOptions?.url ?? request.url.split('?')[0];
  const query = (request.query ?? {}) as Record<string, unknown>;
  const asked = query.owner_id;
  if (asked !== undefined && (typeof asked !== 'string' || !ownerIds.includes(asked)))
    throw new ForbiddenError('owner_id is outside the owners this token is scoped to.', 'owner_id');
  if (OPEN.has(route) || FILTERED.test(route)) return;
  if (!BY_OWNER.test(route))
    throw new ForbiddenError(
      'A token scoped to owners may read only its owners’ menus, resources, orders, stores, changes and events.',
    );
  if (asked === undefined && ownerIds.length === 1) query.owner_id = ownerIds[0];
}

/** The scope of the request's token (ApiTokenGuard has checked it); null for a token of every owner. */
export function ownerScopeOf(request: FastifyRequest): OwnerScope {
  return request.principal?.ownerIds ?? null;
}

/** Whether `ownerId` (an entry's or a resource's, null when it has none) is within `scope`. */
export function withinScope(scope: OwnerScope, ownerId: string | null): boolean {
  return scope === null || (ownerId !== null && scope.includes(ownerId));
}

/** A handler's parameter: the scope of the request's token (`ownerScopeOf`). */
export const TokenScope = createParamDecorator((_data: unknown, context: ExecutionContext): OwnerScope =>
  ownerScopeOf(context.switchToHttp().getRequest<FastifyRequest>()),
);

import type { FastifyRequest } from 'fastify';
import { ForbiddenError } from './app-error.js';

/** The reads a token scoped to owners may make: each takes `owner_id`, and answers that owner's data only. */
const BY_OWNER = /^\/api\/v1\/(menu|changes|collections|products|traits|trait_options|orders|order_products|stores)$/;
const OPEN = new Set(['/api/v1/whoami']);

/**
 * What a token scoped to `ownerIds` may ask (docs/reference.md §12, Owner scope): the reads that
 * take `owner_id`, for one of its owners (`owner_id` given and in its scope; absent, its one owner
 * if it has one), and `whoami`. Anything else is refused: no route answers such a token with data
 * of owners outside its scope, and none widens it through a parameter. Sets `owner_id` on the query
 * when the token named none (before the route's validation reads it).
 */
export function checkOwnerScope(request: FastifyRequest, ownerIds: readonly string[]): void {
  const route = request.routeOptions?.url ?? request.url.split('?')[0];
  if (OPEN.has(route)) return;
  if (!BY_OWNER.test(route))
    throw new ForbiddenError(
      'A token scoped to owners may read only the menu, the resource lists and the change feed of its owners.',
    );
  const query = (request.query ?? {}) as Record<string, unknown>;
  const asked = query.owner_id;
  if (asked === undefined) {
    if (ownerIds.length !== 1)
      throw new ForbiddenError('This token is scoped to several owners: name one of them with owner_id.', 'owner_id');
    query.owner_id = ownerIds[0];
    return;
  }
  if (typeof asked !== 'string' || !ownerIds.includes(asked))
    throw new ForbiddenError('owner_id is outside the owners this token is scoped to.', 'owner_id');
}

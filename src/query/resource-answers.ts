import type { FastifyReply } from 'fastify';
import { routedRead } from '../changes/min-cursor.js';
import type { OwnerScope } from '../common/owner-scope.js';
import type { ReadRouter } from '../database/read-router.service.js';
import type { AsOfQuery, ListQuery } from './resource-query.dto.js';
import { ApiResource, ResourceQueryService } from './resource-query.service.js';

/** What Fastify sends an object as: the answers written as text say the same. */
export const JSON_TYPE = 'application/json; charset=utf-8';

/** A deleted resource answers 410 with its tombstone as the body. */
export function answer(reply: FastifyReply, resource: ApiResource): ApiResource {
  reply.status(resource.deleted ? 410 : 200);
  return resource;
}

/**
 * A list page (docs/reference.md §5), its `changes_cursor` repeated as X-Changes-Cursor (§11), read
 * where `router` sends it, within the token's `scope` (§12).
 */
export async function sendPage(
  reply: FastifyReply,
  resources: ResourceQueryService,
  router: ReadRouter,
  name: string,
  query: ListQuery,
  scope: OwnerScope = null,
): Promise<void> {
  const page = await routedRead(router, reply, query.min_cursor, (side) => resources.list(name, query, side, scope));
  if (page.changes_cursor !== null) reply.header('X-Changes-Cursor', page.changes_cursor);
  await reply.type(JSON_TYPE).send(page.body);
}

/**
 * A resource by id: 200, or 410 with its tombstone; 404 (thrown) when never seen or outside the
 * token's `scope`. Read where `router` sends it.
 */
export async function sendResource(
  reply: FastifyReply,
  resources: ResourceQueryService,
  router: ReadRouter,
  name: string,
  id: string,
  query: AsOfQuery,
  scope: OwnerScope = null,
): Promise<void> {
  const found = await routedRead(router, reply, query.min_cursor, (side) =>
    resources.getText(name, id, query.as_of, side, scope),
  );
  await reply
    .status(found.deleted ? 410 : 200)
    .type(JSON_TYPE)
    .send(found.body);
}

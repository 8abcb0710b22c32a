import type { FastifyReply } from 'fastify';
import type { ListQuery } from './resource-query.dto.js';
import { ApiResource, ResourceQueryService } from './resource-query.service.js';

/** What Fastify sends an object as: the answers written as text say the same. */
export const JSON_TYPE = 'application/json; charset=utf-8';

/** A deleted resource answers 410 with its tombstone as the body. */
export function answer(reply: FastifyReply, resource: ApiResource): ApiResource {
  reply.status(resource.deleted ? 410 : 200);
  return resource;
}

/** A list page (docs/reference.md §5), its `changes_cursor` repeated as X-Changes-Cursor (§11). */
export async function sendPage(
  reply: FastifyReply,
  resources: ResourceQueryService,
  name: string,
  query: ListQuery,
): Promise<void> {
  const page = await resources.list(name, query);
  if (page.changes_cursor !== null) reply.header('X-Changes-Cursor', page.changes_cursor);
  await reply.type(JSON_TYPE).send(page.body);
}

/** A resource by id: 200, or 410 with its tombstone; 404 (thrown) when never seen. */
export async function sendResource(
  reply: FastifyReply,
  resources: ResourceQueryService,
  name: string,
  id: string,
  asOf: Date | undefined,
): Promise<void> {
  const found = await resources.getText(name, id, asOf);
  await reply
    .status(found.deleted ? 410 : 200)
    .type(JSON_TYPE)
    .send(found.body);
}

import { Logger } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod, RouteOptions } from 'fastify';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { isoInstant } from '../common/iso-date.js';
import { sendProblem } from '../common/problem-details.filter.js';
import { RESOURCE_TABLES } from '../projection/resource-tables.js';
import { sendMenu, sendPage, sendResource } from './menu.controller.js';
import type { ListQuery, MenuQuery } from './resource-query.dto.js';
import { ResourceQueryService } from './resource-query.service.js';

const logger = new Logger('DirectReads');

type Query = Record<string, unknown>;

/** How a route's plain queries are read (undefined: not plain, Nest's pipeline decides) and answered. */
interface DirectRoute {
  read(request: FastifyRequest): Query | undefined;
  /** Sends the answer (sendPage, sendResource, sendMenu: what the controllers send too). */
  serve(request: FastifyRequest, reply: FastifyReply, query: Query): Promise<void>;
}

/**
 * The hot reads (a resource by id, a page, `/menu`, live or `as_of`) answered without Nest's
 * per-request pipeline when their query is one of the plain shapes: no expansion, every value well formed.
 * The pipeline (router, guard, class-validator, interceptor, filter lookup) cost as much CPU per
 * read as the read itself. Anything else — a value the DTOs would refuse, an
 * unknown parameter, an expansion — goes to the controller's own handler, which answers it as before:
 * the same answers (sendPage, sendResource, sendMenu), the same guard, the same problem documents either way.
 *
 * Installed before Nest registers its routes: it wraps the handlers of the routes it knows.
 */
export function installDirectReads(
  fastify: FastifyInstance,
  resources: ResourceQueryService,
  guard: ApiTokenGuard,
): void {
  const routes = directRoutes(resources);
  fastify.addHook('onRoute', (route: RouteOptions) => {
    const direct = route.method === 'GET' ? routes.get(route.url ?? '') : undefined;
    if (direct === undefined) return;
    const viaNest = route.handler as RouteHandlerMethod;
    route.handler = function directOrNest(this: FastifyInstance, request, reply) {
      const query = direct.read(request);
      // Returned as Nest returns it: an async wrapper resolving early would make Fastify send an empty body.
      if (query === undefined) return viaNest.call(this, request, reply);
      return serveDirect(direct, request, reply, query);
    };
  });

  async function serveDirect(
    direct: DirectRoute,
    request: FastifyRequest,
    reply: FastifyReply,
    query: Query,
  ): Promise<FastifyReply> {
    try {
      guard.check(request);
      await direct.serve(request, reply, query);
      return reply;
    } catch (error) {
      return sendProblem(reply, request, error, logger);
    }
  }
}

function directRoutes(resources: ResourceQueryService): Map<string, DirectRoute> {
  const routes = new Map<string, DirectRoute>();
  for (const { name } of Object.values(RESOURCE_TABLES)) {
    if (name === 'order_product_trait_options') continue;
    routes.set(`/api/v1/${name}`, {
      read: (request) => plainListQuery(request.query as Query),
      serve: (_request, reply, query) => sendPage(reply, resources, name, query as unknown as ListQuery),
    });
    routes.set(`/api/v1/${name}/:id`, {
      read: (request) =>
        (request.params as { id: string }).id === '' ? undefined : plainAsOfQuery(request.query as Query),
      serve: (request, reply, query) =>
        sendResource(reply, resources, name, (request.params as { id: string }).id, query.as_of as Date | undefined),
    });
  }
  routes.set('/api/v1/menu', {
    read: (request) => plainMenuQuery(request.query as Query),
    serve: (request, reply, query) =>
      sendMenu(reply, resources, query as unknown as MenuQuery, request.headers['if-none-match']),
  });
  return routes;
}

const CURSOR = /^[A-Za-z0-9_-]{1,400}$/;
const LIMIT = /^\d{1,15}$/;

/**
 * `owner_id`, `limit`, `cursor`, `include_deleted`, `updated_since` and `as_of` as ListQuery would
 * accept them, with its defaults; undefined for anything else.
 */
export function plainListQuery(query: Query): Query | undefined {
  const read: Query = { limit: 100, include_deleted: false };
  for (const [name, value] of Object.entries(query)) {
    if (typeof value !== 'string') return undefined;
    if (name === 'owner_id' && value.length <= 255) read.owner_id = value;
    else if (name === 'limit' && LIMIT.test(value) && Number(value) >= 1 && Number(value) <= 1000)
      read.limit = Number(value);
    else if (name === 'cursor' && CURSOR.test(value)) read.cursor = value;
    else if (name === 'include_deleted' && (value === 'true' || value === 'false'))
      read.include_deleted = value === 'true';
    else if ((name === 'as_of' || name === 'updated_since') && instant(value) !== undefined)
      read[name] = instant(value);
    else return undefined;
  }
  return read;
}

/** Only `as_of`, as AsOfQuery would accept it (or nothing). */
export function plainAsOfQuery(query: Query): Query | undefined {
  const { as_of: asOf, ...rest } = query;
  if (Object.keys(rest).length > 0) return undefined;
  if (asOf === undefined) return {};
  const at = typeof asOf === 'string' ? instant(asOf) : undefined;
  return at === undefined ? undefined : { as_of: at };
}

/** An ISO 8601 value read as the DTOs read it (IsoDate, then IsDate); undefined where they would refuse it. */
function instant(value: string): Date | undefined {
  const at = isoInstant(value);
  return at === undefined || Number.isNaN(at.getTime()) ? undefined : at;
}

/** `owner_id` (required) and `form` as MenuQuery would accept them; undefined for anything else. */
export function plainMenuQuery(query: Query): Query | undefined {
  const read: Query = { form: 'expanded' };
  for (const [name, value] of Object.entries(query)) {
    if (typeof value !== 'string') return undefined;
    if (name === 'owner_id' && value.length <= 255) read.owner_id = value;
    else if (name === 'form' && (value === 'expanded' || value === 'normalized')) read.form = value;
    else return undefined;
  }
  return read.owner_id === undefined ? undefined : read;
}

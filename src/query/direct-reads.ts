import { Logger } from '@nestjs/common';
import { maxLength } from 'class-validator';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod, RouteOptions } from 'fastify';
import { CHANGE_CURSOR } from '../changes/min-cursor.js';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { isoInstant } from '../common/iso-date.js';
import { sendProblem } from '../common/problem-details.filter.js';
import type { ReadRouter } from '../database/read-router.service.js';
import { RESOURCE_TABLES } from '../projection/resource-tables.js';
import { sendPage, sendResource } from './resource-answers.js';
import type { AsOfQuery, ListQuery } from './resource-query.dto.js';
import { ResourceQueryService } from './resource-query.service.js';

const logger = new Logger('DirectReads');

type Query = Record<string, unknown>;

/** How a route's plain queries are read (undefined: not plain, Nest's pipeline decides) and answered. */
export interface DirectRoute {
  read(request: FastifyRequest): Query | undefined;
  /** Sends the answer (sendPage, sendResource, sendMenu: what the controllers send too). */
  serve(request: FastifyRequest, reply: FastifyReply, query: Query): Promise<void>;
}

/**
 * The hot reads (a resource by id, a page, `/menu`, live or `as_of`) answered without Nest's
 * per-request pipeline when their query is one the DTOs accept, read as they read it (no expansion).
 * The pipeline (router, guard, class-validator, interceptor, filter lookup) cost as much CPU per
 * read as the read itself. Anything else — a value the DTOs refuse, an unknown
 * parameter, an expansion — goes to the controller's own handler, which answers it as before:
 * the same answers (sendPage, sendResource, sendMenu), the same guard, the same problem documents either way.
 *
 * Installed before Nest registers its routes: it wraps the handlers of the routes (by URL) it is given.
 */
export function installDirectReads(
  fastify: FastifyInstance,
  directRoutes: Iterable<readonly [string, DirectRoute]>,
  guard: ApiTokenGuard,
): void {
  const routes = new Map(directRoutes);
  fastify.addHook('onRoute', (route: RouteOptions) => {
    const direct = route.method === 'GET' ? routes.get(route.url ?? '') : undefined;
    if (direct === undefined) return;
    const viaNest = route.handler as RouteHandlerMethod;
    route.handler = function directOrNest(this: FastifyInstance, request, reply) {
      // A token scoped to owners goes through Nest, whose guard sets its owner on the query first.
      const query = guard.scoped(request) ? undefined : direct.read(request);
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

/** The pages and the reads by id of every resource collection but order_product_trait_options. */
export function resourceDirectRoutes(
  resources: ResourceQueryService,
  router: ReadRouter,
): Array<[string, DirectRoute]> {
  return Object.values(RESOURCE_TABLES)
    .filter(({ name }) => name !== 'order_product_trait_options')
    .flatMap(({ name }): Array<[string, DirectRoute]> => [
      [
        `/api/v1/${name}`,
        {
          read: (request) => accepted(readListQuery(request.query as Query)),
          serve: (_request, reply, query) => sendPage(reply, resources, router, name, query as unknown as ListQuery),
        },
      ],
      [
        `/api/v1/${name}/:id`,
        {
          read: (request) =>
            (request.params as { id: string }).id === '' ? undefined : accepted(readAsOfQuery(request.query as Query)),
          serve: (request, reply, query) =>
            sendResource(
              reply,
              resources,
              router,
              name,
              (request.params as { id: string }).id,
              query as unknown as AsOfQuery,
            ),
        },
      ],
    ]);
}

/** A query as its DTO reads it (its fields, with their defaults), or the field its problem would name. */
export type QueryReading = { query: Query } | { refused: string };

export const accepted = (reading: QueryReading): Query | undefined => ('query' in reading ? reading.query : undefined);

const REFUSED = Symbol('refused');

/**
 * One parameter of a DTO as its decorators read it: what a value becomes, or REFUSED. Every
 * parameter of the query DTOs refuses anything but one string (a repeated one comes as an array).
 */
export interface QueryField {
  name: string;
  read(value: string): unknown;
  /** Its value when absent: the DTO's initialiser, or REFUSED when it is required. */
  absent?: unknown;
}

/**
 * A query read by a DTO's `fields` as the validation pipe reads it: refused where the pipe refuses
 * it, naming the field the pipe's problem names, the first error of class-validator's — an unknown
 * parameter first (forbidNonWhitelisted, in the query's order), then the fields in the DTO's order
 * (the class's own as declared, then its parent's), which `fields` keeps.
 */
export function readQuery(fields: readonly QueryField[], query: Query): QueryReading {
  for (const name of Object.keys(query)) if (!fields.some((field) => field.name === name)) return { refused: name };
  const read: Query = {};
  for (const field of fields) {
    const value = query[field.name];
    const taken = value === undefined ? field.absent : typeof value === 'string' ? field.read(value) : REFUSED;
    if (taken === REFUSED) return { refused: field.name };
    if (taken !== undefined) read[field.name] = taken;
  }
  return { query: read };
}

/** IsIn(`values`). */
export const oneOf =
  (values: readonly string[]) =>
  (value: string): string | typeof REFUSED =>
    values.includes(value) ? value : REFUSED;

/** The field, required (IsString without IsOptional). */
export const required = (field: QueryField): QueryField => ({ ...field, absent: REFUSED });

/** An ISO 8601 value read as the DTOs read it (IsoDate, then IsDate). */
function instant(value: string): Date | typeof REFUSED {
  const at = isoInstant(value);
  return at === undefined || Number.isNaN(at.getTime()) ? REFUSED : at;
}

const DIGITS = /^\d{1,15}$/;
const CURSOR = /^[A-Za-z0-9_-]{1,400}$/;

/** IsString and MaxLength(255), which counts a surrogate pair as one character. */
export const OWNER_ID: QueryField = {
  name: 'owner_id',
  read: (value) => (value.length <= 255 || maxLength(value, 255) ? value : REFUSED),
};
export const AS_OF: QueryField = { name: 'as_of', read: instant };
export const MIN_CURSOR: QueryField = {
  name: 'min_cursor',
  read: (value) => (CHANGE_CURSOR.test(value) ? value : REFUSED),
};

/** ListQuery's fields in class-validator's order: its own, then PageQuery's `limit`. */
const LIST_FIELDS: readonly QueryField[] = [
  OWNER_ID,
  { name: 'updated_since', read: instant },
  {
    name: 'include_deleted',
    read: (value) => (value === 'true' ? true : value === 'false' ? false : REFUSED),
    absent: false,
  },
  { name: 'cursor', read: (value) => (CURSOR.test(value) ? value : REFUSED) },
  AS_OF,
  MIN_CURSOR,
  {
    name: 'limit',
    read: (value) => (DIGITS.test(value) && Number(value) >= 1 && Number(value) <= 1000 ? Number(value) : REFUSED),
    absent: 100,
  },
];

/** A list page's query as ListQuery reads it. */
export function readListQuery(query: Query): QueryReading {
  return readQuery(LIST_FIELDS, query);
}

/** A read by id's query as AsOfQuery reads it. */
export function readAsOfQuery(query: Query): QueryReading {
  return readQuery(AS_OF_FIELDS, query);
}

const AS_OF_FIELDS: readonly QueryField[] = [AS_OF, MIN_CURSOR];

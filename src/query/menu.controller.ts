import { Readable } from 'node:stream';
import { Controller, Get, Headers, Param, Query, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { AsOfQuery, ListQuery, MenuQuery, ProductQuery } from './resource-query.dto.js';
import { ApiResource, ResourceQueryService } from './resource-query.service.js';

/** What Fastify sends an object as: the answers written as text say the same. */
const JSON_TYPE = 'application/json; charset=utf-8';

/** A deleted resource answers 410 with its tombstone as the body. */
export function answer(reply: FastifyReply, resource: ApiResource): ApiResource {
  reply.status(resource.deleted ? 410 : 200);
  return resource;
}

/** `/menu`: 304 on a matching ETag, else the document streamed, with its X-Changes-Cursor when live. */
export async function sendMenu(
  reply: FastifyReply,
  resources: ResourceQueryService,
  query: MenuQuery,
  ifNoneMatch: string | undefined,
): Promise<void> {
  const answer = await resources.menu(query.owner_id, query.form, ifNoneMatch, query.as_of);
  reply.header('ETag', answer.etag);
  if (answer.notModified) {
    await reply.status(304).send();
    return;
  }
  if (answer.changesCursor !== null) reply.header('X-Changes-Cursor', answer.changesCursor);
  const body = answer.chunks instanceof Readable ? answer.chunks : Readable.from(answer.chunks, { objectMode: false });
  // A client gone before the first chunk: the snapshot's connection is released all the same.
  body.once('close', () => void answer.close?.());
  await reply.status(200).type(JSON_TYPE).send(body);
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

@ApiTags('menu')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1')
export class MenuController {
  constructor(private readonly resources: ResourceQueryService) {}

  @Get('menu')
  async menu(
    @Query() query: MenuQuery,
    @Headers('if-none-match') ifNoneMatch: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await sendMenu(reply, this.resources, query, ifNoneMatch);
  }

  @Get('collections')
  async collections(@Query() query: ListQuery, @Res() reply: FastifyReply): Promise<void> {
    await sendPage(reply, this.resources, 'collections', query);
  }

  @Get('products')
  async products(@Query() query: ListQuery, @Res() reply: FastifyReply): Promise<void> {
    await sendPage(reply, this.resources, 'products', query);
  }

  @Get('traits')
  async traits(@Query() query: ListQuery, @Res() reply: FastifyReply): Promise<void> {
    await sendPage(reply, this.resources, 'traits', query);
  }

  @Get('trait_options')
  async traitOptions(@Query() query: ListQuery, @Res() reply: FastifyReply): Promise<void> {
    await sendPage(reply, this.resources, 'trait_options', query);
  }

  @Get('collections/:id')
  async collection(@Param('id') id: string, @Query() query: AsOfQuery, @Res() reply: FastifyReply): Promise<void> {
    await sendResource(reply, this.resources, 'collections', id, query.as_of);
  }

  @Get('products/:id')
  async product(
    @Param('id') id: string,
    @Query() query: ProductQuery,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return answer(reply, await this.resources.product(id, query.expand === 'traits', query.as_of));
  }

  @Get('traits/:id')
  async trait(@Param('id') id: string, @Query() query: AsOfQuery, @Res() reply: FastifyReply): Promise<void> {
    await sendResource(reply, this.resources, 'traits', id, query.as_of);
  }

  @Get('trait_options/:id')
  async traitOption(@Param('id') id: string, @Query() query: AsOfQuery, @Res() reply: FastifyReply): Promise<void> {
    await sendResource(reply, this.resources, 'trait_options', id, query.as_of);
  }
}

import { Readable } from 'node:stream';
import { Controller, Get, Headers, Param, Query, Res, UseGuards, UseInterceptors } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ChangesCursorHeader } from '../changes/changes-cursor-header.interceptor.js';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { AsOfQuery, ListQuery, MenuQuery, ProductQuery } from './resource-query.dto.js';
import { ApiResource, ResourceQueryService } from './resource-query.service.js';

/** A deleted resource answers 410 with its tombstone as the body. */
export function answer(reply: FastifyReply, resource: ApiResource): ApiResource {
  reply.status(resource.deleted ? 410 : 200);
  return resource;
}

/** `/menu`: 304 on a matching ETag, else the document streamed, with its X-Changes-Cursor when live. */
export async function sendMenu(reply: FastifyReply, resources: ResourceQueryService, query: MenuQuery,
  ifNoneMatch: string | undefined): Promise<void> {
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
  await reply.status(200).type('application/json; charset=utf-8').send(body);
}

@ApiTags('menu')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1')
export class MenuController {
  constructor(private readonly resources: ResourceQueryService) {}

  @Get('menu')
  async menu(@Query() query: MenuQuery, @Headers('if-none-match') ifNoneMatch: string | undefined,
    @Res() reply: FastifyReply): Promise<void> {
    await sendMenu(reply, this.resources, query, ifNoneMatch);
  }

  @Get('collections')
  @UseInterceptors(ChangesCursorHeader)
  collections(@Query() query: ListQuery) {
    return this.resources.list('collections', query);
  }

  @Get('products')
  @UseInterceptors(ChangesCursorHeader)
  products(@Query() query: ListQuery) {
    return this.resources.list('products', query);
  }

  @Get('traits')
  @UseInterceptors(ChangesCursorHeader)
  traits(@Query() query: ListQuery) {
    return this.resources.list('traits', query);
  }

  @Get('trait_options')
  @UseInterceptors(ChangesCursorHeader)
  traitOptions(@Query() query: ListQuery) {
    return this.resources.list('trait_options', query);
  }

  @Get('collections/:id')
  async collection(@Param('id') id: string, @Query() query: AsOfQuery, @Res({ passthrough: true }) reply: FastifyReply) {
    return answer(reply, await this.resources.get('collections', id, query.as_of));
  }

  @Get('products/:id')
  async product(@Param('id') id: string, @Query() query: ProductQuery, @Res({ passthrough: true }) reply: FastifyReply) {
    return answer(reply, await this.resources.product(id, query.expand === 'traits', query.as_of));
  }

  @Get('traits/:id')
  async trait(@Param('id') id: string, @Query() query: AsOfQuery, @Res({ passthrough: true }) reply: FastifyReply) {
    return answer(reply, await this.resources.get('traits', id, query.as_of));
  }

  @Get('trait_options/:id')
  async traitOption(@Param('id') id: string, @Query() query: AsOfQuery, @Res({ passthrough: true }) reply: FastifyReply) {
    return answer(reply, await this.resources.get('trait_options', id, query.as_of));
  }
}

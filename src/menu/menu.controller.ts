import { Controller, Get, UseInterceptors, Headers, Param, Query, Res, UseGuards } from '@nestjs/common';
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

@ApiTags('menu')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@UseInterceptors(ChangesCursorHeader)
@Controller('api/v1')
export class MenuController {
  constructor(private readonly resources: ResourceQueryService) {}

  @Get('menu')
  async menu(@Query() query: MenuQuery, @Headers('if-none-match') ifNoneMatch: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply) {
    const { body, etag } = await this.resources.menu(query.owner_id, query.as_of);
    reply.header('ETag', etag);
    if (ifNoneMatch?.split(',').some((tag) => tag.trim() === etag)) return reply.status(304).send();
    return body;
  }

  @Get('collections')
  collections(@Query() query: ListQuery) {
    return this.resources.list('collections', query);
  }

  @Get('products')
  products(@Query() query: ListQuery) {
    return this.resources.list('products', query);
  }

  @Get('traits')
  traits(@Query() query: ListQuery) {
    return this.resources.list('traits', query);
  }

  @Get('trait_options')
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

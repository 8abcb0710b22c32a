import { Controller, Get, Param, Query, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { routedRead } from '../changes/min-cursor.js';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { type OwnerScope, TokenScope } from '../common/owner-scope.js';
import { ReadRouter } from '../database/read-router.service.js';
import { answer, sendPage, sendResource } from './resource-answers.js';
import { AsOfQuery, ListQuery, ProductQuery } from './resource-query.dto.js';
import { ResourceQueryService } from './resource-query.service.js';

/** The menu's resources, a collection's page or one by id (the whole document is MenuController's). */
@ApiTags('menu')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1')
export class MenuResourcesController {
  constructor(
    private readonly resources: ResourceQueryService,
    private readonly router: ReadRouter,
  ) {}

  @Get('collections')
  async collections(
    @Query() query: ListQuery,
    @TokenScope() scope: OwnerScope,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await sendPage(reply, this.resources, this.router, 'collections', query, scope);
  }

  @Get('products')
  async products(
    @Query() query: ListQuery,
    @TokenScope() scope: OwnerScope,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await sendPage(reply, this.resources, this.router, 'products', query, scope);
  }

  @Get('traits')
  async traits(@Query() query: ListQuery, @TokenScope() scope: OwnerScope, @Res() reply: FastifyReply): Promise<void> {
    await sendPage(reply, this.resources, this.router, 'traits', query, scope);
  }

  @Get('trait_options')
  async traitOptions(
    @Query() query: ListQuery,
    @TokenScope() scope: OwnerScope,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await sendPage(reply, this.resources, this.router, 'trait_options', query, scope);
  }

  @Get('collections/:id')
  async collection(
    @Param('id') id: string,
    @Query() query: AsOfQuery,
    @TokenScope() scope: OwnerScope,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await sendResource(reply, this.resources, this.router, 'collections', id, query, scope);
  }

  @Get('products/:id')
  async product(
    @Param('id') id: string,
    @Query() query: ProductQuery,
    @TokenScope() scope: OwnerScope,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const product = await routedRead(this.router, reply, query.min_cursor, (side) =>
      this.resources.product(id, query.expand === 'traits', query.as_of, side, scope),
    );
    return answer(reply, product);
  }

  @Get('traits/:id')
  async trait(
    @Param('id') id: string,
    @Query() query: AsOfQuery,
    @TokenScope() scope: OwnerScope,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await sendResource(reply, this.resources, this.router, 'traits', id, query, scope);
  }

  @Get('trait_options/:id')
  async traitOption(
    @Param('id') id: string,
    @Query() query: AsOfQuery,
    @TokenScope() scope: OwnerScope,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await sendResource(reply, this.resources, this.router, 'trait_options', id, query, scope);
  }
}

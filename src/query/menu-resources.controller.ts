import { Controller, Get, Param, Query, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { answer, sendPage, sendResource } from './resource-answers.js';
import { AsOfQuery, ListQuery, ProductQuery } from './resource-query.dto.js';
import { ResourceQueryService } from './resource-query.service.js';

/** The menu's resources, a collection's page or one by id (the whole document is MenuController's). */
@ApiTags('menu')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1')
export class MenuResourcesController {
  constructor(private readonly resources: ResourceQueryService) {}

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

import { Controller, Get, Param, Query, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { routedRead } from '../changes/min-cursor.js';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { type OwnerScope, TokenScope } from '../common/owner-scope.js';
import { ReadRouter } from '../database/read-router.service.js';
import { answer, sendPage, sendResource } from './resource-answers.js';
import { AsOfQuery, ListQuery, OrderQuery } from './resource-query.dto.js';
import { ResourceQueryService } from './resource-query.service.js';

@ApiTags('orders')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1')
export class OrdersController {
  constructor(
    private readonly resources: ResourceQueryService,
    private readonly router: ReadRouter,
  ) {}

  @Get('orders')
  async orders(@Query() query: ListQuery, @TokenScope() scope: OwnerScope, @Res() reply: FastifyReply): Promise<void> {
    await sendPage(reply, this.resources, this.router, 'orders', query, scope);
  }

  @Get('order_products')
  async orderProducts(
    @Query() query: ListQuery,
    @TokenScope() scope: OwnerScope,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await sendPage(reply, this.resources, this.router, 'order_products', query, scope);
  }

  @Get('stores')
  async stores(@Query() query: ListQuery, @TokenScope() scope: OwnerScope, @Res() reply: FastifyReply): Promise<void> {
    await sendPage(reply, this.resources, this.router, 'stores', query, scope);
  }

  @Get('orders/:id')
  async order(
    @Param('id') id: string,
    @Query() query: OrderQuery,
    @TokenScope() scope: OwnerScope,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const order = await routedRead(this.router, reply, query.min_cursor, (side) =>
      this.resources.order(id, query.expand === 'order_products', query.as_of, side, scope),
    );
    return answer(reply, order);
  }

  @Get('order_products/:id')
  async orderProduct(
    @Param('id') id: string,
    @Query() query: AsOfQuery,
    @TokenScope() scope: OwnerScope,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await sendResource(reply, this.resources, this.router, 'order_products', id, query, scope);
  }

  @Get('stores/:id')
  async store(
    @Param('id') id: string,
    @Query() query: AsOfQuery,
    @TokenScope() scope: OwnerScope,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await sendResource(reply, this.resources, this.router, 'stores', id, query, scope);
  }
}

import { Controller, Get, UseInterceptors, Param, Query, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ChangesCursorHeader } from '../changes/changes-cursor-header.interceptor.js';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { answer } from './menu.controller.js';
import { AsOfQuery, ListQuery, OrderQuery } from './resource-query.dto.js';
import { ResourceQueryService } from './resource-query.service.js';

@ApiTags('orders')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@UseInterceptors(ChangesCursorHeader)
@Controller('api/v1')
export class OrdersController {
  constructor(private readonly resources: ResourceQueryService) {}

  @Get('orders')
  orders(@Query() query: ListQuery) {
    return this.resources.list('orders', query);
  }

  @Get('order_products')
  orderProducts(@Query() query: ListQuery) {
    return this.resources.list('order_products', query);
  }

  @Get('stores')
  stores(@Query() query: ListQuery) {
    return this.resources.list('stores', query);
  }

  @Get('orders/:id')
  async order(@Param('id') id: string, @Query() query: OrderQuery, @Res({ passthrough: true }) reply: FastifyReply) {
    return answer(reply, await this.resources.order(id, query.expand === 'order_products', query.as_of));
  }

  @Get('order_products/:id')
  async orderProduct(@Param('id') id: string, @Query() query: AsOfQuery, @Res({ passthrough: true }) reply: FastifyReply) {
    return answer(reply, await this.resources.get('order_products', id, query.as_of));
  }

  @Get('stores/:id')
  async store(@Param('id') id: string, @Query() query: AsOfQuery, @Res({ passthrough: true }) reply: FastifyReply) {
    return answer(reply, await this.resources.get('stores', id, query.as_of));
  }
}

import { Module } from '@nestjs/common';
import { MenuModule } from '../menu/menu.module.js';
import { OrdersController } from './orders.controller.js';

@Module({
  imports: [MenuModule],
  controllers: [OrdersController],
})
export class OrdersModule {}

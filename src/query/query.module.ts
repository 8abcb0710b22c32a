import { Module } from '@nestjs/common';
import { ArchiveHorizonModule } from '../event-log/archive-horizon.module.js';
import { MenuResourcesController } from './menu-resources.controller.js';
import { OrdersController } from './orders.controller.js';
import { ReadModelModule } from './read-model.module.js';
import { ResourceQueryService } from './resource-query.service.js';

/** The resource reads (docs/reference.md §5): menu and order resources, pages and by id, live and `as_of`. */
@Module({
  imports: [ReadModelModule, ArchiveHorizonModule],
  controllers: [MenuResourcesController, OrdersController],
  providers: [ResourceQueryService],
  exports: [ResourceQueryService],
})
export class QueryModule {}

import { Module } from '@nestjs/common';
import { ChangesModule } from '../changes/changes.module.js';
import { IngressModule } from '../ingress/ingress.module.js';
import { MenuController } from './menu.controller.js';
import { MenuDocumentCache } from './menu-document.cache.js';
import { MenuDocumentRepository } from './menu-document.repository.js';
import { OrdersController } from './orders.controller.js';
import { ReadModelModule } from './read-model.module.js';
import { ResourceQueryService } from './resource-query.service.js';

/** The read side (docs/reference.md §5): menu and order resources, live and `as_of`, and the streamed `/menu`. */
@Module({
  imports: [ChangesModule, IngressModule, ReadModelModule],
  controllers: [MenuController, OrdersController],
  providers: [ResourceQueryService, MenuDocumentRepository, MenuDocumentCache],
  exports: [ResourceQueryService],
})
export class QueryModule {}

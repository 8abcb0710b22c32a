import { Module } from '@nestjs/common';
import { replicaProvider } from '../database/read-replica.js';
import { ChangesModule } from '../changes/changes.module.js';
import { ArchiveHorizonModule } from '../event-log/archive-horizon.module.js';
import { IngressModule } from '../ingress/ingress.module.js';
import { ReadModelModule } from '../query/read-model.module.js';
import { MenuController } from './menu.controller.js';
import { MenuDocumentCache } from './menu-document.cache.js';
import { MenuDocumentRepository } from './menu-document.repository.js';
import { MenuDocumentService } from './menu-document.service.js';

/** The streamed `/menu` document (docs/reference.md §5), live (kept in files per owner version) and `as_of`. */
@Module({
  imports: [ChangesModule, IngressModule, ReadModelModule, ArchiveHorizonModule],
  controllers: [MenuController],
  providers: [MenuDocumentService, MenuDocumentRepository, replicaProvider(MenuDocumentRepository), MenuDocumentCache],
  exports: [MenuDocumentService],
})
export class MenuModule {}

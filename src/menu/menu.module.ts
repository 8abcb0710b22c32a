import { Module } from '@nestjs/common';
import { ChangesModule } from '../changes/changes.module.js';
import { ProjectionModule } from '../projection/projection.module.js';
import { MenuController } from './menu.controller.js';
import { MenuDocumentRepository } from './menu-document.repository.js';
import { ResourceQueryService } from './resource-query.service.js';

@Module({
  imports: [ProjectionModule, ChangesModule],
  controllers: [MenuController],
  providers: [ResourceQueryService, MenuDocumentRepository],
  exports: [ResourceQueryService],
})
export class MenuModule {}

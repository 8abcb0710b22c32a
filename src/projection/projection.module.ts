import { Module } from '@nestjs/common';
import { EventLogModule } from '../event-log/event-log.module.js';
import { ProjectionStatusService } from './projection-status.service.js';
import { ProjectionStoreModule } from './projection-store.module.js';
import { ProjectionsController } from './projections.controller.js';
import { ProjectorService } from './projector.service.js';

/** The daemon's projector (one per database: it holds an advisory lease) and /api/v1/projections. */
@Module({
  imports: [ProjectionStoreModule, EventLogModule],
  controllers: [ProjectionsController],
  providers: [ProjectorService, ProjectionStatusService],
  exports: [ProjectionStoreModule, ProjectorService],
})
export class ProjectionModule {}

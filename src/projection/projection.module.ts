import { Module } from '@nestjs/common';
import { EventLogModule } from '../event-log/event-log.module.js';
import { ProjectionStatusService } from './projection-status.service.js';
import { AppConfig } from '../config/app-config.js';
import { CHANGES_TYPES, ProjectionRepository } from './projection.repository.js';
import { ProjectionsController } from './projections.controller.js';
import { ProjectorService } from './projector.service.js';

/** CHANGES_TYPES from the configuration, for ProjectionRepository. */
export const CHANGES_TYPES_PROVIDER = { provide: CHANGES_TYPES, useFactory: (config: AppConfig) => config.changeTypes, inject: [AppConfig] };

@Module({
  imports: [EventLogModule],
  controllers: [ProjectionsController],
  providers: [CHANGES_TYPES_PROVIDER, ProjectionRepository, ProjectorService, ProjectionStatusService],
  exports: [CHANGES_TYPES, ProjectionRepository, ProjectorService],
})
export class ProjectionModule {}

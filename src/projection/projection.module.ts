import { Module } from '@nestjs/common';
import { EventLogModule } from '../event-log/event-log.module.js';
import { ProjectionStatusService } from './projection-status.service.js';
import { ProjectionRepository } from './projection.repository.js';
import { ProjectionsController } from './projections.controller.js';
import { ProjectorService } from './projector.service.js';
import { ReadModelRepository } from './read-model.repository.js';

@Module({
  imports: [EventLogModule],
  controllers: [ProjectionsController],
  providers: [ProjectionRepository, ProjectorService, ProjectionStatusService, ReadModelRepository],
  exports: [ProjectionRepository, ProjectorService, ReadModelRepository],
})
export class ProjectionModule {}

import { Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { CHANGES_TYPES, ProjectionRepository } from './projection.repository.js';
import { ProjectionStatusRepository } from './projection-status.repository.js';

/** CHANGES_TYPES from the configuration, for ProjectionRepository. */
const CHANGES_TYPES_PROVIDER = {
  provide: CHANGES_TYPES,
  useFactory: (config: AppConfig) => config.changeTypes,
  inject: [AppConfig],
};

/**
 * The projections' store without their loop: applying pages, status, parked entries. What a
 * one-shot command (reconcile, replay) imports; importing it starts nothing.
 */
@Module({
  providers: [CHANGES_TYPES_PROVIDER, ProjectionRepository, ProjectionStatusRepository],
  exports: [CHANGES_TYPES, ProjectionRepository, ProjectionStatusRepository],
})
export class ProjectionStoreModule {}

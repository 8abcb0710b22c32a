import { Module } from '@nestjs/common';
import { ProjectionModule } from '../projection/projection.module.js';
import { RebuildService } from './rebuild.service.js';
import { ShadowSchemaRepository } from './shadow-schema.repository.js';

/** Rebuilds from the log (replay, verify), for the CLI and for reconcile. */
@Module({
  imports: [ProjectionModule],
  providers: [RebuildService, ShadowSchemaRepository],
  exports: [RebuildService],
})
export class ReplayModule {}

import { Module } from '@nestjs/common';
import { ProjectionModule } from '../projection/projection.module.js';
import { RebuildService } from './rebuild.service.js';

/** Rebuilds from the log (replay, verify), for the CLI and for reconcile. */
@Module({
  imports: [ProjectionModule],
  providers: [RebuildService],
  exports: [RebuildService],
})
export class ReplayModule {}

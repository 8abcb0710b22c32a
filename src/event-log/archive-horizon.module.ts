import { Module } from '@nestjs/common';
import { ArchiveHorizonRepository } from './archive-horizon.repository.js';
import { ArchiveHorizonService } from './archive-horizon.service.js';

/** The archive horizon kept in memory (one per process: every room that reads across it imports this). */
@Module({
  providers: [ArchiveHorizonRepository, ArchiveHorizonService],
  exports: [ArchiveHorizonService],
})
export class ArchiveHorizonModule {}

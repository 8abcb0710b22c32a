import { Module } from '@nestjs/common';
import { replicaOf, replicaProvider } from '../database/read-replica.js';
import { ChangeLogRepository } from './change-log.repository.js';

/** The change log (docs/reference.md §11): its reader, cursors and retention; the feed. Its reader on the replica too. */
@Module({
  providers: [ChangeLogRepository, replicaProvider(ChangeLogRepository)],
  exports: [ChangeLogRepository, replicaOf(ChangeLogRepository)],
})
export class ChangesModule {}

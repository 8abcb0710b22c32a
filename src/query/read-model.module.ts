import { Module } from '@nestjs/common';
import { replicaOf, replicaProvider } from '../database/read-replica.js';
import { ReadModelRepository } from './read-model.repository.js';

/**
 * The read model's repository alone: what reconcile compares with, for the daemon and for a
 * one-shot command, and what `/menu` folds `as_of` from. Importing it starts nothing (QueryModule also
 * brings the controllers). Its instance on the replica too, for the reads ReadRouter sends there.
 */
@Module({
  providers: [ReadModelRepository, replicaProvider(ReadModelRepository)],
  exports: [ReadModelRepository, replicaOf(ReadModelRepository)],
})
export class ReadModelModule {}

import { Module } from '@nestjs/common';
import { ReadModelRepository } from './read-model.repository.js';

/**
 * The read model's repository alone: what reconcile compares with, for the daemon and for a
 * one-shot command, and what `/menu` folds `as_of` from. Importing it starts nothing (QueryModule also
 * brings the controllers).
 */
@Module({
  providers: [ReadModelRepository],
  exports: [ReadModelRepository],
})
export class ReadModelModule {}

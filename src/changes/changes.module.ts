import { Module } from '@nestjs/common';
import { ChangeLogRepository } from './change-log.repository.js';

/** The change log (docs/reference.md §11): its reader, cursors and retention; the feed. */
@Module({
  providers: [ChangeLogRepository],
  exports: [ChangeLogRepository],
})
export class ChangesModule {}

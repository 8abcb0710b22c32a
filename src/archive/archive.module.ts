import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { ArchiveScheduleService } from './archive-schedule.service.js';

/** The event log's archive in the daemon: ARCHIVE_AFTER's schedule (the commands use ArchiveService directly). */
@Module({
  imports: [AuditModule],
  providers: [ArchiveScheduleService],
})
export class ArchiveModule {}

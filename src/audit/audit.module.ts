import { Module } from '@nestjs/common';
import { AuditController } from './audit.controller.js';
import { AuditLog } from './audit-log.service.js';
import { AuditReaderGuard } from './audit-reader.guard.js';
import { AuditRetentionService } from './audit-retention.service.js';
import { AuditRepository } from './audit.repository.js';

/**
 * Recording only (docs/reference.md §12): what a room that writes imports, in the daemon and in the
 * CLI's commands alike. `AuditLog.record` is the one call.
 */
@Module({
  providers: [AuditRepository, AuditLog],
  exports: [AuditLog, AuditRepository],
})
export class AuditModule {}

/** The daemon's side: `GET /api/v1/audit` and the retention job (AUDIT_RETENTION). */
@Module({
  imports: [AuditModule],
  controllers: [AuditController],
  providers: [AuditRetentionService, AuditReaderGuard],
})
export class AuditApiModule {}

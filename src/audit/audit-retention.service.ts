import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { PruneLoop } from '../common/prune-loop.js';
import { AppConfig } from '../config/app-config.js';
import { AuditRepository } from './audit.repository.js';

/** AUDIT_RETENTION (docs/reference.md §12): entries older than that are deleted (PruneLoop). */
@Injectable()
export class AuditRetentionService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly loop: PruneLoop;

  constructor(repository: AuditRepository, config: AppConfig) {
    this.loop = new PruneLoop(
      { what: 'audit log', retentionMs: config.auditRetentionMs, prune: (before) => repository.prune(before) },
      new Logger(AuditRetentionService.name),
    );
  }

  onApplicationBootstrap(): void {
    this.loop.start();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.loop.stop();
  }
}

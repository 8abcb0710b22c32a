import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { PruneLoop } from '../common/prune-loop.js';
import { AppConfig } from '../config/app-config.js';
import { QuarantineRepository } from './quarantine.repository.js';

/** QUARANTINE_RETENTION: rejected bodies received longer ago than that are deleted (PruneLoop). */
@Injectable()
export class QuarantineRetentionService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly loop: PruneLoop;

  constructor(repository: QuarantineRepository, config: AppConfig) {
    this.loop = new PruneLoop(
      {
        what: 'quarantine',
        retentionMs: config.quarantineRetentionMs,
        prune: (before) => repository.prune(before),
      },
      new Logger(QuarantineRetentionService.name),
    );
  }

  onApplicationBootstrap(): void {
    this.loop.start();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.loop.stop();
  }
}

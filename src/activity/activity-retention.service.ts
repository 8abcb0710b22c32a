import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { PruneLoop } from '../common/prune-loop.js';
import { AppConfig } from '../config/app-config.js';
import { ActivityRepository } from './activity.repository.js';

/** ACTIVITY_RETENTION (docs/reference.md §11): minutes older than that are deleted (PruneLoop). */
@Injectable()
export class ActivityRetentionService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly loop: PruneLoop;

  constructor(repository: ActivityRepository, config: AppConfig) {
    this.loop = new PruneLoop(
      {
        what: 'activity history',
        retentionMs: config.activityRetentionMs,
        prune: (before) => repository.prune(before),
      },
      new Logger(ActivityRetentionService.name),
    );
  }

  onApplicationBootstrap(): void {
    this.loop.start();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.loop.stop();
  }
}

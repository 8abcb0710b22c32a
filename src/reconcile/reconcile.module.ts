import { DynamicModule, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { ConnectionsModule } from '../connections/connections.module.js';
import { EventLogModule } from '../event-log/event-log.module.js';
import { ProjectionModule } from '../projection/projection.module.js';
import { ProjectionStoreModule } from '../projection/projection-store.module.js';
import { ReadModelRepository } from '../query/read-model.repository.js';
import { QueryModule } from '../query/query.module.js';
import { UpstreamModule } from '../upstream/upstream.module.js';
import { ProjectionCatchUp } from './projection-catch-up.js';
import { ReconcileController } from './reconcile.controller.js';
import { ReconcileRepository } from './reconcile.repository.js';
import { ReconcileScheduler } from './reconcile.scheduler.js';
import { ReconcileService } from './reconcile.service.js';
import { SnapshotFetcher } from './snapshot.fetcher.js';

const SERVICE_PROVIDERS = [ReconcileService, ReconcileRepository, SnapshotFetcher, ProjectionCatchUp];

/** Reconcile: the service and its reports; in the daemon also its schedule and API. */
@Module({})
export class ReconcileModule {
  static forDaemon(): DynamicModule {
    return {
      module: ReconcileModule,
      imports: [ConnectionsModule, UpstreamModule, EventLogModule, ProjectionModule, QueryModule, ScheduleModule.forRoot()],
      controllers: [ReconcileController],
      providers: [...SERVICE_PROVIDERS, ReconcileScheduler],
      exports: [ReconcileService, ReconcileScheduler],
    };
  }

  /**
   * For a one-shot command: the projections' store without their loop. The read model's repository
   * is provided here directly, since QueryModule would start the change feed's listener.
   */
  static forCommand(): DynamicModule {
    return {
      module: ReconcileModule,
      imports: [ConnectionsModule, UpstreamModule, EventLogModule, ProjectionStoreModule],
      providers: [...SERVICE_PROVIDERS, ReadModelRepository],
      exports: [ReconcileService],
    };
  }
}

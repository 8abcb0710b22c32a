import { DynamicModule, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { ConnectionsModule } from '../connections/connections.module.js';
import { EventLogModule } from '../event-log/event-log.module.js';
import { ProjectionModule } from '../projection/projection.module.js';
import { ProjectionStoreModule } from '../projection/projection-store.module.js';
import { ReadModelModule } from '../query/read-model.module.js';
import { UpstreamModule } from '../upstream/upstream.module.js';
import { ConnectionReconciler } from './connection.reconciler.js';
import { ProjectionCatchUp } from './projection-catch-up.js';
import { DEFAULT_STORE_RETRIES, ReconcilePass, STORE_RETRIES } from './reconcile-pass.js';
import { ReconcileLeaseRepository } from './reconcile-lease.repository.js';
import { ReconcileSpread } from './reconcile-spread.service.js';
import { ReconcileStoresRepository } from './reconcile-stores.repository.js';
import { ReconcileController } from './reconcile.controller.js';
import { ReconcileRepository } from './reconcile.repository.js';
import { ReconcileScheduler } from './reconcile.scheduler.js';
import { ReconcileService } from './reconcile.service.js';
import { SnapshotFetcher } from './snapshot.fetcher.js';
import { StoreSchedule } from './store-schedule.js';

const SERVICE_PROVIDERS = [
  ReconcileService,
  ConnectionReconciler,
  { provide: STORE_RETRIES, useValue: DEFAULT_STORE_RETRIES },
  ReconcilePass,
  ReconcileRepository,
  SnapshotFetcher,
  ProjectionCatchUp,
  ReconcileStoresRepository,
  StoreSchedule,
];

/** Reconcile: the service, its reports and its per-store schedule; in the daemon also the schedule's loops and the API. */
@Module({})
export class ReconcileModule {
  static forDaemon(): DynamicModule {
    return {
      module: ReconcileModule,
      imports: [
        ConnectionsModule,
        UpstreamModule,
        EventLogModule,
        ProjectionModule,
        ReadModelModule,
        ScheduleModule.forRoot(),
      ],
      controllers: [ReconcileController],
      providers: [...SERVICE_PROVIDERS, ReconcileScheduler, ReconcileLeaseRepository, ReconcileSpread],
      exports: [ReconcileService, ReconcileScheduler, ReconcileSpread],
    };
  }

  /** For a one-shot command: the projections' store without their loop, and the read model without the change feed. */
  static forCommand(): DynamicModule {
    return {
      module: ReconcileModule,
      imports: [ConnectionsModule, UpstreamModule, EventLogModule, ProjectionStoreModule, ReadModelModule],
      providers: SERVICE_PROVIDERS,
      exports: [ReconcileService],
    };
  }
}

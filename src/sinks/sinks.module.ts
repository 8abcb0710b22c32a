import { Module } from '@nestjs/common';
import { ActivityModule } from '../activity/activity.module.js';
import { AuditModule } from '../audit/audit.module.js';
import { SecretCipherModule } from '../common/secret-cipher.module.js';
import { ChangeFeedModule } from '../changes/change-feed.module.js';
import { ChangesModule } from '../changes/changes.module.js';
import { EgressGuard } from './egress/egress-guard.js';
import { HttpSinkClient } from './http/http-sink.client.js';
import { NatsSinkClient } from './nats/nats-sink.client.js';
import { SinkAttemptsController } from './api/sink-attempts.controller.js';
import { SinkAttemptsRepository } from './attempts/sink-attempts.repository.js';
import { SinkAttemptsService } from './attempts/sink-attempts.service.js';
import { SinkDispatcherService } from './dispatch/sink-dispatcher.service.js';
import { SinkLeaseRepository } from './dispatch/sink-lease.repository.js';
import { SinkListing } from './sink-listing.repository.js';
import { SinkRepository } from './sink.repository.js';
import { SinkSnapshots } from './sink-start.js';
import { SinkWrites } from './sink-writes.js';
import { SinksController } from './api/sinks.controller.js';
import { SinksService } from './api/sinks.service.js';
import { TableRefillRepository } from './tables/table-refill.repository.js';
import { TableSinksClient } from './tables/table-sinks.client.js';

/** Sink management only (the CLI): no dispatcher. */
@Module({
  imports: [SecretCipherModule, ChangesModule, AuditModule],
  providers: [SinkRepository, SinkListing, SinkSnapshots, SinksService, EgressGuard],
  exports: [SinksService, SinkRepository, SinkListing, SinkSnapshots, EgressGuard],
})
export class SinkStoreModule {}

/** Push sinks (docs/reference.md §11): their API and the dispatcher that delivers them. */
@Module({
  imports: [SinkStoreModule, ChangesModule, ChangeFeedModule, ActivityModule],
  controllers: [SinksController, SinkAttemptsController],
  providers: [
    HttpSinkClient,
    NatsSinkClient,
    TableSinksClient,
    TableRefillRepository,
    SinkDispatcherService,
    SinkWrites,
    SinkLeaseRepository,
    SinkAttemptsRepository,
    SinkAttemptsService,
  ],
  exports: [SinkDispatcherService],
})
export class SinksModule {}

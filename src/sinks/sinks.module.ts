import { Module } from '@nestjs/common';
import { SecretCipherModule } from '../common/secret-cipher.module.js';
import { ChangeFeedModule } from '../changes/change-feed.module.js';
import { ChangesModule } from '../changes/changes.module.js';
import { EgressGuard } from './egress-guard.js';
import { HttpSinkClient } from './http-sink.client.js';
import { NatsSinkClient } from './nats-sink.client.js';
import { SinkAttemptsController } from './sink-attempts.controller.js';
import { SinkAttemptsRepository } from './sink-attempts.repository.js';
import { SinkAttemptsService } from './sink-attempts.service.js';
import { SinkDispatcherService } from './sink-dispatcher.service.js';
import { SinkLeaseRepository } from './sink-lease.repository.js';
import { SinkRepository } from './sink.repository.js';
import { SinkSnapshots } from './sink-start.js';
import { SinksController } from './sinks.controller.js';
import { SinksService } from './sinks.service.js';
import { TableSinksClient } from './tables/table-sinks.client.js';

/** Sink management only (the CLI): no dispatcher. */
@Module({
  imports: [SecretCipherModule, ChangesModule],
  providers: [SinkRepository, SinkSnapshots, SinksService, EgressGuard],
  exports: [SinksService, SinkRepository, SinkSnapshots, EgressGuard],
})
export class SinkStoreModule {}

/** Push sinks (docs/reference.md §11): their API and the dispatcher that delivers them. */
@Module({
  imports: [SinkStoreModule, ChangesModule, ChangeFeedModule],
  controllers: [SinksController, SinkAttemptsController],
  providers: [
    HttpSinkClient,
    NatsSinkClient,
    TableSinksClient,
    SinkDispatcherService,
    SinkLeaseRepository,
    SinkAttemptsRepository,
    SinkAttemptsService,
  ],
  exports: [SinkDispatcherService],
})
export class SinksModule {}

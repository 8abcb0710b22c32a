import { Module } from '@nestjs/common';
import { SecretCipherModule } from '../common/secret-cipher.module.js';
import { ChangesModule } from '../changes/changes.module.js';
import { HttpSinkClient } from './http-sink.client.js';
import { NatsSinkClient } from './nats-sink.client.js';
import { SinkDispatcherService } from './sink-dispatcher.service.js';
import { SinkRepository } from './sink.repository.js';
import { SinksController } from './sinks.controller.js';
import { SinksService } from './sinks.service.js';
import { TableSinksClient } from './tables/table-sinks.client.js';

/** Sink management only (the CLI): no dispatcher. */
@Module({
  imports: [SecretCipherModule, ChangesModule],
  providers: [SinkRepository, SinksService],
  exports: [SinksService, SinkRepository],
})
export class SinkStoreModule {}

/** Push sinks (CONTRACT §11): their API and the dispatcher that delivers them. */
@Module({
  imports: [SinkStoreModule, ChangesModule],
  controllers: [SinksController],
  providers: [HttpSinkClient, NatsSinkClient, TableSinksClient, SinkDispatcherService],
  exports: [SinkDispatcherService],
})
export class SinksModule {}

import { Module } from '@nestjs/common';
import { ConnectionStoreModule } from '../auth/connection-store.module.js';
import { AppendBatcher } from './append-batcher.js';
import { EventLogQueryService } from './event-log-query.service.js';
import { EventLogRepository } from './event-log.repository.js';
import { EventsController } from './events.controller.js';
import { OwnersController } from './owners.controller.js';
import { RawBodySealer } from './raw-body-sealer.js';

@Module({
  imports: [ConnectionStoreModule],
  controllers: [EventsController, OwnersController],
  providers: [EventLogRepository, AppendBatcher, EventLogQueryService, RawBodySealer],
  exports: [EventLogRepository, AppendBatcher, RawBodySealer],
})
export class EventLogModule {}

import { Module } from '@nestjs/common';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { SecretCipherModule } from '../common/secret-cipher.module.js';
import { AppendBatcher } from './append-batcher.js';
import { AppendSignal } from './append-signal.js';
import { ArchiveHorizonModule } from './archive-horizon.module.js';
import { EventLogQueryService } from './event-log-query.service.js';
import { EventLogRepository } from './event-log.repository.js';
import { EventsController } from './events.controller.js';
import { LogPartitionsService } from './log-partitions.service.js';
import { OwnersController } from './owners.controller.js';
import { RawBodySealer } from './raw-body-sealer.js';

@Module({
  imports: [SecretCipherModule, ArchiveHorizonModule],
  controllers: [EventsController, OwnersController],
  providers: [
    ApiTokenGuard,
    EventLogRepository,
    AppendBatcher,
    AppendSignal,
    EventLogQueryService,
    RawBodySealer,
    LogPartitionsService,
  ],
  exports: [EventLogRepository, AppendBatcher, AppendSignal, RawBodySealer],
})
export class EventLogModule {}

import { Module } from '@nestjs/common';
import { AppendBatcher } from './append-batcher.js';
import { EventLogQueryService } from './event-log-query.service.js';
import { EventLogRepository } from './event-log.repository.js';
import { EventsController } from './events.controller.js';

@Module({
  controllers: [EventsController],
  providers: [EventLogRepository, AppendBatcher, EventLogQueryService],
  exports: [EventLogRepository, AppendBatcher],
})
export class EventLogModule {}

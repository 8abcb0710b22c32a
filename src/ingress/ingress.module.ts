import { Module } from '@nestjs/common';
import { ActivityModule } from '../activity/activity.module.js';
import { EventLogModule } from '../event-log/event-log.module.js';
import { AppendReadiness } from './append-readiness.js';
import { DeliveriesInFlight } from './deliveries-in-flight.js';
import { IngressService } from './ingress.service.js';
import { QuarantineRepository } from './quarantine.repository.js';
import { WebhookKeyRegistry } from './webhook-key.registry.js';
import { WebhookKeyRepository } from './webhook-key.repository.js';
import { QuarantineController } from './quarantine.controller.js';
import { QuarantineService } from './quarantine.service.js';
import { QuarantineRetentionService } from './quarantine-retention.service.js';

@Module({
  imports: [EventLogModule, ActivityModule],
  controllers: [QuarantineController],
  providers: [
    AppendReadiness,
    IngressService,
    QuarantineService,
    QuarantineRepository,
    QuarantineRetentionService,
    WebhookKeyRegistry,
    WebhookKeyRepository,
    DeliveriesInFlight,
  ],
  exports: [IngressService, WebhookKeyRegistry, WebhookKeyRepository, DeliveriesInFlight],
})
export class IngressModule {}

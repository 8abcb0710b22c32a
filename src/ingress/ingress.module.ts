import { Module } from '@nestjs/common';
import { EventLogModule } from '../event-log/event-log.module.js';
import { IngressController } from './ingress.controller.js';
import { IngressService } from './ingress.service.js';
import { QuarantineRepository } from './quarantine.repository.js';
import { WebhookKeyRegistry } from './webhook-key.registry.js';
import { WebhookKeyRepository } from './webhook-key.repository.js';
import { QuarantineController } from './quarantine.controller.js';
import { QuarantineService } from './quarantine.service.js';

@Module({
  imports: [EventLogModule],
  controllers: [IngressController, QuarantineController],
  providers: [IngressService, QuarantineService, QuarantineRepository, WebhookKeyRegistry, WebhookKeyRepository],
  exports: [WebhookKeyRegistry, WebhookKeyRepository],
})
export class IngressModule {}

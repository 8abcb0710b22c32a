import { Module } from '@nestjs/common';
import { ConnectionsModule } from '../connections/connections.module.js';
import { IngressModule } from '../ingress/ingress.module.js';
import { UpstreamModule } from '../upstream/upstream.module.js';
import { SubscriptionRepository } from './subscription.repository.js';
import { SubscriptionService } from './subscription.service.js';

/** Webhook subscriptions of a connection: registered upstream, with the keys ingress accepts. */
@Module({
  imports: [ConnectionsModule, UpstreamModule, IngressModule],
  providers: [SubscriptionRepository, SubscriptionService],
  exports: [SubscriptionRepository, SubscriptionService],
})
export class SubscriptionsModule {}

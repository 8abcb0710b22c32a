import { Module } from '@nestjs/common';
import { IngressModule } from '../ingress/ingress.module.js';
import { SubscriptionRepository } from '../upstream/subscription.repository.js';
import { SubscriptionService } from '../upstream/subscription.service.js';
import { UpstreamModule } from '../upstream/upstream.module.js';
import { AuthController } from './auth.controller.js';
import { AuthorizationStateRepository } from './authorization-state.repository.js';
import { ConnectService } from './connect.service.js';
import { ConnectionStoreModule } from './connection-store.module.js';
import { ConnectionsController } from './connections.controller.js';
import { ConnectionsService } from './connections.service.js';

/** The connect flow, the connections API and webhook subscriptions. */
@Module({
  imports: [ConnectionStoreModule, UpstreamModule, IngressModule],
  controllers: [AuthController, ConnectionsController],
  providers: [AuthorizationStateRepository, ConnectService, ConnectionsService, SubscriptionRepository, SubscriptionService],
  exports: [ConnectService, ConnectionsService, SubscriptionService],
})
export class AuthModule {}

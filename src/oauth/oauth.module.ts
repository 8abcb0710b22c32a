import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { SecretCipherModule } from '../common/secret-cipher.module.js';
import { SubscriptionsModule } from '../subscriptions/subscriptions.module.js';
import { UpstreamModule } from '../upstream/upstream.module.js';
import { AuthController } from './auth.controller.js';
import { AuthorizationStateRepository } from './authorization-state.repository.js';
import { ConnectService } from './connect.service.js';
import { ConnectionsModule } from '../connections/connections.module.js';
import { ConnectionsController } from './connections.controller.js';
import { ConnectionsService } from './connections.service.js';

/** The connect flow (docs/reference.md §6) and the connections API. */
@Module({
  imports: [SecretCipherModule, ConnectionsModule, UpstreamModule, SubscriptionsModule, AuditModule],
  controllers: [AuthController, ConnectionsController],
  providers: [AuthorizationStateRepository, ConnectService, ConnectionsService],
  exports: [ConnectService, ConnectionsService],
})
export class OAuthModule {}

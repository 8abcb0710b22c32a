import { DynamicModule, Module } from '@nestjs/common';
import { Clock } from './clock.js';
import { PlatformApiController } from './api/platform-api.controller.js';
import { PlatformApiService } from './api/platform-api.service.js';
import { ControlController } from './control/control.controller.js';
import { TriggerService } from './control/trigger.service.js';
import { DeliveriesController } from './delivery/deliveries.controller.js';
import { DeliveryService } from './delivery/delivery.service.js';
import { SubscriptionRegistry } from './delivery/subscription.registry.js';
import { WebhookEndpointsController } from './delivery/webhook-endpoints.controller.js';
import { EMULATOR_OPTIONS, EmulatorOptions } from './emulator-options.js';
import { FaultSettings } from './fault-settings.js';
import { OAuthControlController } from './oauth/oauth-control.controller.js';
import { OAuthController } from './oauth/oauth.controller.js';
import { OAuthServer } from './oauth/oauth-server.service.js';
import { EVENT_SINK } from './platform-event.js';
import { EmulatorState } from './state/emulator-state.service.js';

/** The platform stand-in (docs/reference.md §9): OAuth server, API, control API and webhook delivery, all in memory. */
@Module({})
export class EmulatorModule {
  static register(options: EmulatorOptions): DynamicModule {
    return {
      module: EmulatorModule,
      controllers: [
        OAuthController,
        OAuthControlController,
        PlatformApiController,
        WebhookEndpointsController,
        DeliveriesController,
        ControlController,
      ],
      providers: [
        { provide: EMULATOR_OPTIONS, useValue: options },
        Clock,
        FaultSettings,
        OAuthServer,
        SubscriptionRegistry,
        DeliveryService,
        { provide: EVENT_SINK, useExisting: DeliveryService },
        EmulatorState,
        PlatformApiService,
        TriggerService,
      ],
      exports: [EmulatorState, DeliveryService, OAuthServer, FaultSettings, Clock],
    };
  }
}

import { DynamicModule, Module } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { AppConfig } from './config/app-config.js';
import { ConfigModule } from './config/config.module.js';
import { DatabaseModule } from './database/database.module.js';
import { EventLogModule } from './event-log/event-log.module.js';
import { IngressModule } from './ingress/ingress.module.js';
import { MenuModule } from './menu/menu.module.js';
import { OrdersModule } from './orders/orders.module.js';
import { ProjectionModule } from './projection/projection.module.js';
import { ReplayModule } from './replay/replay.module.js';
import { ObservabilityModule } from './observability/observability.module.js';

export interface AppModuleOptions {
  config: AppConfig;
  databaseUrl: string;
}

@Module({})
export class AppModule {
  static register({ config, databaseUrl }: AppModuleOptions): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forRoot({ url: databaseUrl, poolSize: config.DATABASE_POOL_SIZE }),
        EventEmitterModule.forRoot(),
        ObservabilityModule,
        EventLogModule,
        IngressModule,
        ProjectionModule,
        MenuModule,
        OrdersModule,
        ReplayModule,
      ],
    };
  }
}

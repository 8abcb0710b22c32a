import { DynamicModule, Module } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { ActivityApiModule } from './activity/activity.module.js';
import { ArchiveModule } from './archive/archive.module.js';
import { AuditApiModule } from './audit/audit.module.js';
import { AccessModule } from './common/whoami.controller.js';
import { AppConfig } from './config/app-config.js';
import { ConfigModule } from './config/config.module.js';
import { DatabaseModule } from './database/database.module.js';
import { withRootCert } from './database/database-tls.js';
import { EventLogModule } from './event-log/event-log.module.js';
import { IngressModule } from './ingress/ingress.module.js';
import { MenuModule } from './menu/menu.module.js';
import { QueryModule } from './query/query.module.js';
import { ProjectionModule } from './projection/projection.module.js';
import { ObservabilityModule } from './observability/observability.module.js';
import { OAuthModule } from './oauth/oauth.module.js';
import { ChangeFeedModule } from './changes/change-feed.module.js';
import { ReconcileModule } from './reconcile/reconcile.module.js';
import { SinksModule } from './sinks/sinks.module.js';
import { StatusModule } from './status/status.module.js';
import { TokensModule } from './tokens/tokens.module.js';
import { UpstreamSettings } from './upstream/upstream-settings.js';
import { UpstreamSettingsModule } from './upstream/upstream-settings.module.js';
import { UpstreamModule } from './upstream/upstream.module.js';

export interface AppModuleOptions {
  config: AppConfig;
  databaseUrl: string;
  /** The upstream to connect to: by default the configured one (null when none). */
  upstream?: UpstreamSettings | null;
}

@Module({})
export class AppModule {
  static register({
    config,
    databaseUrl,
    upstream = UpstreamSettings.fromConfig(config),
  }: AppModuleOptions): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        UpstreamSettingsModule.forRoot(upstream),
        DatabaseModule.forRoot({
          url: databaseUrl,
          poolSize: config.DATABASE_POOL_SIZE,
          idleSeconds: config.DATABASE_POOL_IDLE_SECONDS,
          sessions: {
            directUrl: config.embeddedDatabase ? undefined : config.DATABASE_DIRECT_URL,
            preparedStatements: config.preparedStatements,
            probe: !config.embeddedDatabase,
          },
          replica:
            config.DATABASE_READ_URL === undefined
              ? undefined
              : {
                  url: withRootCert(config.DATABASE_READ_URL, config.DATABASE_SSL_ROOT_CERT),
                  maxLagMs: config.readReplicaMaxLagMs,
                },
        }),
        EventEmitterModule.forRoot(),
        ObservabilityModule,
        EventLogModule,
        IngressModule,
        ProjectionModule,
        MenuModule,
        QueryModule,
        UpstreamModule,
        OAuthModule,
        ReconcileModule.forDaemon(),
        ArchiveModule,
        ChangeFeedModule,
        SinksModule,
        AccessModule,
        TokensModule,
        AuditApiModule,
        ActivityApiModule,
        StatusModule,
      ],
    };
  }
}

import { DynamicModule, INestApplicationContext, Module } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { OAuthModule } from '../oauth/oauth.module.js';
import { UpstreamNotConfiguredError } from '../upstream/upstream.errors.js';
import { AppError } from '../common/app-error.js';
import { AppConfig } from '../config/app-config.js';
import { ConfigModule } from '../config/config.module.js';
import { DatabaseModule } from '../database/database.module.js';
import { ObservabilityModule } from '../observability/observability.module.js';
import { ReconcileModule } from '../reconcile/reconcile.module.js';
import { UpstreamSettings } from '../upstream/upstream-settings.js';
import { UpstreamSettingsModule } from '../upstream/upstream-settings.module.js';
import { withDaemonContext } from './daemon-database.js';

/** What the connection commands need: the connect flow, subscriptions and reconcile on the daemon's database, no HTTP. */
@Module({})
class ConnectionCommandsModule {
  static register(config: AppConfig, databaseUrl: string): DynamicModule {
    return {
      module: ConnectionCommandsModule,
      imports: [
        ConfigModule.forRoot(config),
        UpstreamSettingsModule.forRoot(UpstreamSettings.fromConfig(config)),
        DatabaseModule.forRoot({ url: databaseUrl, poolSize: 3 }),
        EventEmitterModule.forRoot(),
        ObservabilityModule,
        OAuthModule,
        ReconcileModule.forCommand(),
      ],
    };
  }
}

/**
 * Runs `work` in a Nest application context on the daemon's database (attaching to a running
 * embedded one), migrated first unless MIGRATIONS_RUN=false. Exit codes: an AppError is reported
 * on stderr with exit 1, a missing upstream configuration with exit 2; anything else propagates.
 */
export async function runConnectionCommand(
  command: string,
  config: AppConfig,
  work: (app: INestApplicationContext) => Promise<void>,
): Promise<void> {
  try {
    if (!config.hasUpstream) throw new UpstreamNotConfiguredError();
    await withDaemonContext(config, (url) => ConnectionCommandsModule.register(config, url), work);
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    process.stderr.write(`menu-sync ${command}: ${error.detail}\n`);
    process.exitCode = error instanceof UpstreamNotConfiguredError ? 2 : 1;
  }
}

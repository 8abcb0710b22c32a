import { DynamicModule, Module } from '@nestjs/common';
import { AppError } from '../common/app-error.js';
import { AppConfig } from '../config/app-config.js';
import { ConfigModule } from '../config/config.module.js';
import { DatabaseModule } from '../database/database.module.js';
import { TokenNotFoundError } from '../tokens/tokens.errors.js';
import { TokenRecordsModule } from '../tokens/tokens.module.js';
import { TokensService } from '../tokens/tokens.service.js';
import { withDaemonContext } from './daemon-database.js';

/** Stored API tokens on the daemon's database; every running daemon takes a change within seconds. */
@Module({})
class TokenCommandsModule {
  static register(config: AppConfig, databaseUrl: string): DynamicModule {
    return {
      module: TokenCommandsModule,
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forRoot({ url: databaseUrl, poolSize: 2 }),
        TokenRecordsModule,
      ],
    };
  }
}

/** Exit codes: an unknown token → 1; input the API would refuse (4XX other than 404) → 2, bad usage. */
export async function runTokenCommand(
  command: string,
  config: AppConfig,
  work: (tokens: TokensService) => Promise<void>,
): Promise<void> {
  try {
    await withDaemonContext(
      config,
      (url) => TokenCommandsModule.register(config, url),
      (app) => work(app.get(TokensService)),
    );
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    const field = typeof error.extra.field === 'string' ? ` (${error.extra.field})` : '';
    process.stderr.write(`menu-sync tokens ${command}: ${error.detail}${field}\n`);
    process.exitCode = error instanceof TokenNotFoundError || error.status >= 500 ? 1 : 2;
  }
}

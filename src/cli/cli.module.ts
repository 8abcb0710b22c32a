import { DynamicModule, Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { ConfigModule } from '../config/config.module.js';
import { ROOT_LOGGER, RootLogger } from './cli-context.js';
import { EmulatorResendCommand, EmulatorTriggerCommand } from './emulator-client.command.js';
import { EmulatorCommand } from './emulator.command.js';
import { MigrateCommand } from './migrate.command.js';
import { ArchiveCommand, ArchiveRestoreCommand, ArchiveVerifyCommand } from './archive.command.js';
import { CheckpointCommand } from './checkpoint.command.js';
import { ReplayCommand } from './replay.command.js';
import { VerifyCommand } from './verify.command.js';
import { ServeCommand } from './serve.command.js';
import { AuthCheckCommand, AuthCommand, AuthExchangeCommand, AuthUrlCommand } from './auth.command.js';
import { SubscribeCommand } from './subscribe.command.js';
import { ReconcileCommand } from './reconcile.command.js';
import {
  SinksAddCommand,
  SinksCommand,
  SinksListCommand,
  SinksRemoveCommand,
  SinksReplayCommand,
  SinksShowCommand,
} from './sinks.command.js';
import { SinksVerifyCommand } from './sinks-verify.command.js';
import { StatusCommand } from './status.command.js';
import { TokensAddCommand, TokensCommand, TokensListCommand, TokensRevokeCommand } from './tokens.command.js';

/** The command-line entry: only the commands and what they need, no database until a command opens one. */
@Module({})
export class CliModule {
  static register(config: AppConfig, rootLogger: RootLogger): DynamicModule {
    return {
      module: CliModule,
      imports: [ConfigModule.forRoot(config)],
      providers: [
        { provide: ROOT_LOGGER, useValue: rootLogger },
        ServeCommand,
        MigrateCommand,
        ReplayCommand,
        VerifyCommand,
        CheckpointCommand,
        ArchiveCommand,
        ArchiveVerifyCommand,
        ArchiveRestoreCommand,
        AuthCommand,
        AuthUrlCommand,
        AuthExchangeCommand,
        AuthCheckCommand,
        SubscribeCommand,
        ReconcileCommand,
        EmulatorCommand,
        EmulatorTriggerCommand,
        EmulatorResendCommand,
        StatusCommand,
        SinksCommand,
        SinksAddCommand,
        SinksListCommand,
        SinksShowCommand,
        SinksReplayCommand,
        SinksRemoveCommand,
        SinksVerifyCommand,
        TokensCommand,
        TokensAddCommand,
        TokensListCommand,
        TokensRevokeCommand,
      ],
    };
  }
}

import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { config as loadDotenv } from 'dotenv';
import type { Command } from 'commander';
import { CommandFactory, CommandRunnerService } from 'nest-commander';
import { CliModule } from './cli/cli.module.js';
import { ConfigError, loadConfig } from './config/app-config.js';
import { createRootLogger, PinoNestLogger } from './observability/logger.js';

/** Commands that seal and open no secret, so TOKEN_ENCRYPTION_KEY is not asked of them. */
const SEALING_NOTHING = new Set(['migrate', 'status', 'emulator', 'help', '--help', '-h']);

/** Exit codes: 0 success, 1 failure, 2 bad usage or configuration (docs/reference.md §8). */
async function main(): Promise<void> {
  loadDotenv({ quiet: true });
  let config;
  try {
    config = loadConfig(process.env, { encryptionKey: false });
    // Through the daemon's API (MENU_SYNC_URL) the sinks commands open no secret here either.
    const named = process.argv[2] ?? 'serve';
    const viaApi = named === 'sinks' && config.MENU_SYNC_URL !== undefined;
    const help = process.argv.slice(2).some((arg) => arg === '--help' || arg === '-h');
    if (!SEALING_NOTHING.has(named) && !viaApi && !help) config = loadConfig(process.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`menu-sync: ${error.message}\n`);
    process.exit(2);
  }
  // The daemon and the emulator log to stdout; one-shot commands print their result there, so they log to stderr.
  const command = process.argv[2];
  const longRunning =
    command === undefined ||
    command === 'serve' ||
    (command === 'emulator' && !['trigger', 'resend'].includes(process.argv[3] ?? ''));
  const rootLogger = createRootLogger(config.LOG_LEVEL, false, longRunning ? 1 : 2, config.LOG_FORMAT);
  const nestLogger = new PinoNestLogger(rootLogger);
  Logger.overrideLogger(nestLogger);
  // After the logs and whatever the command printed: a large answer on a pipe may still be queued
  // (Node 24 truncated `sinks list` at 146 kB), and process.exit drops what is.
  const exit = (code: number) => rootLogger.flush(() => process.stdout.write('', () => process.exit(code)));
  // Synchronous: commander exits by itself right after this handler returns.
  const usageError = (error: Error) => {
    const code = (error as { code?: string }).code;
    process.exit(
      code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help' ? 0 : 2,
    );
  };
  const app = await CommandFactory.createWithoutRunning(CliModule.register(config, rootLogger), {
    logger: nestLogger,
    errorHandler: usageError,
    serviceErrorHandler: (error) => {
      rootLogger.error({ err: error }, 'command failed');
      exit(1);
    },
  });
  // nest-commander sets the usage handler on the root command only; subcommands would exit 1 on bad usage.
  // Also: arguments a command does not take are bad usage (commander lets them pass; an unknown
  // command would otherwise start the default one, the daemon).
  const overrideAll = (command: Command) => {
    command.exitOverride(usageError);
    command.allowExcessArguments(false);
    command.commands.forEach(overrideAll);
  };
  const program = (app.get(CommandRunnerService) as unknown as { commander: Command }).commander;
  program.name('menu-sync');
  overrideAll(program);
  try {
    await CommandFactory.runApplication(app);
  } finally {
    await app.close();
  }
  exit(process.exitCode === undefined ? 0 : Number(process.exitCode));
}

void main();

import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { config as loadDotenv } from 'dotenv';
import { CommandFactory } from 'nest-commander';
import { CliModule } from './cli/cli.module.js';
import { ConfigError, loadConfig } from './config/app-config.js';
import { createRootLogger, PinoNestLogger } from './observability/logger.js';

/** Exit codes: 0 success, 1 failure, 2 bad usage or configuration (CONTRACT §8). */
async function main(): Promise<void> {
  loadDotenv({ quiet: true });
  let config;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`menu-sync: ${error.message}\n`);
    process.exit(2);
  }
  const rootLogger = createRootLogger(config.LOG_LEVEL);
  const nestLogger = new PinoNestLogger(rootLogger);
  Logger.overrideLogger(nestLogger);
  const exit = (code: number) => rootLogger.flush(() => process.exit(code));
  await CommandFactory.run(CliModule.register(config, rootLogger), {
    logger: nestLogger,
    errorHandler: (error) => {
      const code = (error as { code?: string }).code;
      exit(code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help' ? 0 : 2);
    },
    serviceErrorHandler: (error) => {
      rootLogger.error({ err: error }, 'command failed');
      exit(1);
    },
  });
  exit(process.exitCode === undefined ? 0 : Number(process.exitCode));
}

void main();

import { Inject, Logger } from '@nestjs/common';
import { Command, CommandRunner } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { Daemon } from '../daemon.js';
import { ROOT_LOGGER } from './cli-context.js';
import type { RootLogger } from './cli-context.js';

@Command({ name: 'serve', description: 'Run the daemon (the default command)', options: { isDefault: true } })
export class ServeCommand extends CommandRunner {
  private readonly logger = new Logger(ServeCommand.name);

  constructor(
    private readonly config: AppConfig,
    @Inject(ROOT_LOGGER) private readonly rootLogger: RootLogger,
  ) {
    super();
  }

  async run(): Promise<void> {
    this.logger.log({ msg: 'configuration', config: this.config.dump() });
    const daemon = await Daemon.start(this.config, this.rootLogger);
    await new Promise<void>((resolve) => {
      const stop = (signal: NodeJS.Signals) => {
        this.logger.log(`${signal} received: shutting down`);
        process.removeListener('SIGTERM', stop);
        process.removeListener('SIGINT', stop);
        daemon.stop().then(resolve, (error) => {
          this.logger.error({ msg: 'shutdown failed', err: error });
          process.exitCode = 1;
          resolve();
        });
      };
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
    });
    this.logger.log('stopped');
  }
}

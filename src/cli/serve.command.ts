import { Inject, Logger } from '@nestjs/common';
import { Command, CommandRunner } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { PooledDirectUrlError } from '../database/session-probe.js';
import { ROOT_LOGGER } from './cli-context.js';
import type { RootLogger } from './cli-context.js';
import { untilSignalled } from './signals.js';

@Command({ name: 'serve', description: 'Run the daemon (the default command)', options: { isDefault: true } })
export class ServeCommand extends CommandRunner {
  private readonly logger = new Logger(ServeCommand.name);

  constructor(
    private readonly config: AppConfig,
    @Inject(ROOT_LOGGER) private readonly rootLogger: RootLogger,
  ) {
    super();
  }

  /** Signals are taken from the first moment: one arriving during start-up stops the daemon once it is up. */
  async run(): Promise<void> {
    const stopRequested = untilSignalled(this.logger);
    this.logger.log({ msg: 'configuration', config: this.config.dump() });
    const { Daemon } = await import('../daemon.js');
    const daemon = await Daemon.start(this.config, this.rootLogger).catch((error: unknown) => {
      if (!(error instanceof PooledDirectUrlError)) throw error;
      this.logger.error(error.message);
      process.stderr.write(`menu-sync: ${error.message}\n`);
      process.exitCode = error.exitCode;
      return null;
    });
    if (daemon === null) return;
    await stopRequested;
    try {
      await daemon.stop();
      this.logger.log('stopped');
    } catch (error) {
      this.logger.error({ msg: 'shutdown failed', err: error });
      process.exitCode = 1;
    }
  }
}

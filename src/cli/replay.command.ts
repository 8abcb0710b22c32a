import { Logger } from '@nestjs/common';
import { Command, CommandRunner, Option } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { progressReporter } from './progress.js';
import { PROJECTION_NAMES, selectProjections, withRebuildService } from './rebuild-context.js';

interface ReplayOptions {
  projection?: string;
}

@Command({ name: 'replay', description: 'Rebuild projections from the event log and swap them in, while the daemon runs' })
export class ReplayCommand extends CommandRunner {
  private readonly logger = new Logger(ReplayCommand.name);

  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], options: ReplayOptions): Promise<void> {
    const projections = selectProjections(options.projection);
    if (projections === undefined) {
      process.stderr.write(`menu-sync replay: --projection must be ${PROJECTION_NAMES}\n`);
      process.exitCode = 2;
      return;
    }
    await withRebuildService(this.config, async (rebuild) => {
      for (const projection of projections) {
        const progress = progressReporter(this.logger);
        try {
          const report = await rebuild.replay(projection, progress.update);
          progress.stop();
          process.stdout.write(`${report.projection}: rebuilt from ${report.applied} log entries in ${report.seconds.toFixed(1)} s `
            + `(${Math.round(report.applied / Math.max(report.seconds, 0.001))} events/s), ${report.parked} parked, swapped in\n`);
        } finally {
          progress.stop();
        }
      }
    });
  }

  @Option({ flags: '-p, --projection <name>', description: `which projection: ${PROJECTION_NAMES} (default all)` })
  parseProjection(value: string): string {
    return value;
  }
}

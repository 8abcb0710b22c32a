import { Logger } from '@nestjs/common';
import { Command, CommandRunner, Option } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { progressReporter } from './progress.js';
import { PROJECTION_NAMES, selectProjections, withRebuildService } from './rebuild-context.js';

interface VerifyOptions {
  projection?: string;
}

@Command({ name: 'verify', description: 'Rebuild projections into scratch tables and compare them with the live read model' })
export class VerifyCommand extends CommandRunner {
  private readonly logger = new Logger(VerifyCommand.name);

  constructor(private readonly config: AppConfig) {
    super();
  }

  /** Prints each difference (type, id, fields); exit 1 on drift, 0 when identical. */
  async run(_: string[], options: VerifyOptions): Promise<void> {
    const projections = selectProjections(options.projection);
    if (projections === undefined) {
      process.stderr.write(`menu-sync verify: --projection must be ${PROJECTION_NAMES}\n`);
      process.exitCode = 2;
      return;
    }
    let drift = 0;
    await withRebuildService(this.config, async (rebuild) => {
      for (const projection of projections) {
        const progress = progressReporter(this.logger);
        try {
          const report = await rebuild.verify(projection, progress.update);
          progress.stop();
          for (const difference of report.differences) {
            process.stdout.write(`${difference.type} ${difference.id}: ${difference.fields.join(', ')}\n`);
          }
          if (report.count > report.differences.length) process.stdout.write(`… and ${report.count - report.differences.length} more\n`);
          process.stdout.write(`${report.projection}: ${report.count === 0 ? 'identical to a rebuild from the log' : `${report.count} difference(s)`}\n`);
          drift += report.count;
        } finally {
          progress.stop();
        }
      }
    });
    if (drift > 0) process.exitCode = 1;
  }

  @Option({ flags: '-p, --projection <name>', description: `which projection: ${PROJECTION_NAMES} (default all)` })
  parseProjection(value: string): string {
    return value;
  }
}

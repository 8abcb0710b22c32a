import { Logger } from '@nestjs/common';
import { Command, CommandRunner, Option } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { PROJECTION_NAMES } from './option-parsers.js';
import { startOf } from './rebuild-start.js';

interface VerifyOptions {
  projection?: string;
  fromCheckpoint?: boolean;
  fromArchive?: boolean;
}

@Command({
  name: 'verify',
  description: 'Rebuild projections into scratch tables and compare them with the live read model',
})
export class VerifyCommand extends CommandRunner {
  private readonly logger = new Logger(VerifyCommand.name);

  constructor(private readonly config: AppConfig) {
    super();
  }

  /** Prints each difference (type, id, fields); exit 1 on drift, 0 when identical. */
  async run(_: string[], options: VerifyOptions): Promise<void> {
    let drift = 0;
    const { forEachProjection } = await import('./rebuild-context.js');
    await forEachProjection(
      'verify',
      this.config,
      this.logger,
      options.projection,
      async (rebuild, projection, progress, _, dataSource) => {
        const { from, log } = await startOf(
          rebuild,
          dataSource,
          projection,
          options,
          this.config.ARCHIVE_DIR,
          'verify',
        );
        const report = await rebuild.verify(projection, progress, from, log);
        drift += report.count;
        const lines = report.differences.map(
          (difference) => `${difference.type} ${difference.id}: ${difference.fields.join(', ')}`,
        );
        if (report.count > report.differences.length)
          lines.push(`… and ${report.count - report.differences.length} more`);
        lines.push(
          `${report.projection}: ${report.count === 0 ? `identical to a rebuild from ${from !== null ? `the checkpoint at position ${from.at.position} and the log after it` : log !== undefined ? 'the archive and the log' : 'the log'}` : `${report.count} difference(s)`}`,
        );
        return `${lines.join('\n')}\n`;
      },
    );
    if (drift > 0) process.exitCode = 1;
  }

  @Option({ flags: '-p, --projection <name>', description: `which projection: ${PROJECTION_NAMES} (default all)` })
  parseProjection(value: string): string {
    return value;
  }

  @Option({
    flags: '--from-checkpoint',
    description: 'start from the newest checkpoint (menu-sync checkpoint) instead of the first log entry',
  })
  parseFromCheckpoint(): boolean {
    return true;
  }

  @Option({ flags: '--from-archive', description: "rebuild from the whole history: the archive's files, then the log" })
  parseFromArchive(): boolean {
    return true;
  }
}

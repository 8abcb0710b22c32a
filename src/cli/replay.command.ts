import { Logger } from '@nestjs/common';
import { Command, CommandRunner, Option } from 'nest-commander';
import { cliActor } from '../audit/audit-actor.js';
import { AppConfig } from '../config/app-config.js';
import { PROJECTION_NAMES } from './option-parsers.js';
import { startOf } from './rebuild-start.js';

interface ReplayOptions {
  projection?: string;
  fromCheckpoint?: boolean;
  fromArchive?: boolean;
}

@Command({
  name: 'replay',
  description: 'Rebuild projections from the event log and swap them in, while the daemon runs',
})
export class ReplayCommand extends CommandRunner {
  private readonly logger = new Logger(ReplayCommand.name);

  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], options: ReplayOptions): Promise<void> {
    const { forEachProjection } = await import('./rebuild-context.js');
    await forEachProjection(
      'replay',
      this.config,
      this.logger,
      options.projection,
      async (rebuild, projection, progress, audit, dataSource) => {
        const { from, log } = await startOf(rebuild, dataSource, projection, options, this.config.ARCHIVE_DIR);
        // One entry per replay, a failed one too: what it rebuilt before failing was a write.
        const report = await rebuild.replay(projection, progress, from, log).catch(async (error: unknown) => {
          await audit.record({
            actor: cliActor(),
            action: 'projection.replayed',
            target: projection.name,
            detail: { outcome: 'failed', error: error instanceof Error ? error.message : String(error) },
          });
          throw error;
        });
        await audit.record({
          actor: cliActor(),
          action: 'projection.replayed',
          target: report.projection,
          detail: {
            outcome: 'ok',
            applied: report.applied,
            parked: report.parked,
            ...(report.from === null ? {} : { from_checkpoint: report.from.at.position }),
            ...(log === undefined ? {} : { from_archive: true }),
          },
        });
        const start =
          report.from !== null
            ? `the checkpoint at position ${report.from.at.position} and `
            : log !== undefined
              ? 'the archive and '
              : '';
        return (
          `${report.projection}: rebuilt from ${start}${report.applied} log entries in ${report.seconds.toFixed(1)} s ` +
          `(${Math.round(report.applied / Math.max(report.seconds, 0.001))} events/s), ${report.parked} parked, swapped in\n`
        );
      },
    );
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

  @Option({
    flags: '--from-archive',
    description:
      "rebuild from the whole history: the archive's files, then the log (slower; the default starts from a checkpoint)",
  })
  parseFromArchive(): boolean {
    return true;
  }
}

import { Command, CommandRunner, Option } from 'nest-commander';
import { cliActor } from '../audit/audit-actor.js';
import { AppConfig } from '../config/app-config.js';
import { PROJECTION_NAMES } from './option-parsers.js';

interface CheckpointOptions {
  projection?: string;
}

@Command({
  name: 'checkpoint',
  description: "Save the projections' state at their position in the log: replay and verify can start from it",
})
export class CheckpointCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], options: CheckpointOptions): Promise<void> {
    const { takeCheckpoints } = await import('./checkpoint-context.js');
    await takeCheckpoints(this.config, options.projection, async (saved, audit) => {
      await audit.record({
        actor: cliActor(),
        action: 'projection.checkpointed',
        target: saved.projection,
        detail: { position: saved.at.position, rows: saved.rows, bytes: saved.bytes },
      });
      process.stdout.write(
        `${saved.projection}: checkpoint at position ${saved.at.position}, ${saved.rows} rows, ` +
          `${(saved.bytes / 1024).toFixed(0)} KiB (${saved.schema})\n`,
      );
    });
  }

  @Option({ flags: '-p, --projection <name>', description: `which projection: ${PROJECTION_NAMES} (default all)` })
  parseProjection(value: string): string {
    return value;
  }
}

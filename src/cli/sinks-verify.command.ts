import { CommandRunner, Option, SubCommand } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { printJson } from './output.js';
import { SinkCommandError } from './sinks-client.js';

/**
 * `menu-sync sinks verify <id> [--repair] [--json]` (docs/reference.md §12): exit 0 when the sink's
 * tables equal the API (after the repair, with `--repair`), 1 when they differ or a failure, 2 bad usage.
 */
@SubCommand({
  name: 'verify',
  arguments: '<id>',
  description:
    "Compare a table sink's tables with the API (per type: rows, a digest, the ids that differ); --repair rewrites what differs",
})
export class SinksVerifyCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run([id]: string[], flags: { repair?: boolean; json?: boolean }): Promise<void> {
    try {
      const { verifySink, formatVerification } = await import('./sinks-verifier.js');
      const { before, after } = await verifySink(this.config, id, flags.repair === true);
      if (flags.json) printJson({ data: before, repaired: after });
      else {
        process.stdout.write(formatVerification(before));
        if (after !== null) process.stdout.write(`repaired:\n${formatVerification(after)}`);
      }
      process.exitCode = (after ?? before).equal ? 0 : 1;
    } catch (error) {
      if (!(error instanceof SinkCommandError)) throw error;
      process.stderr.write(`menu-sync sinks verify: ${error.message}\n`);
      process.exitCode = error.exitCode;
    }
  }

  @Option({ flags: '--repair', description: 'rewrite the rows that differ, then compare again' })
  parseRepair(): boolean {
    return true;
  }

  @Option({ flags: '--json', description: 'print the comparison as JSON' })
  parseJson(): boolean {
    return true;
  }
}

import { InvalidArgumentError } from 'commander';
import { Command, CommandRunner, Option } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { ReconcileService } from '../reconcile/reconcile.service.js';
import { printJson, runConnectionCommand } from './auth-context.js';
import { connectionOption } from './option-parsers.js';

interface ReconcileFlags {
  connection?: number;
  store?: string;
}

/** `menu-sync reconcile [--connection ID] [--store ID]`: one run now; prints its report; exit 0 only when it is `ok`. */
@Command({
  name: 'reconcile',
  description: 'Compare the mirror with the upstream now and append the differences to the event log',
})
export class ReconcileCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], flags: ReconcileFlags): Promise<void> {
    await runConnectionCommand('reconcile', this.config, async (app) => {
      const run = await app
        .get(ReconcileService)
        .run('command', { connectionId: flags.connection, storeId: flags.store });
      printJson({ data: run });
      if (run.outcome !== 'ok') process.exitCode = 1;
    });
  }

  @Option({ flags: '-c, --connection <id>', description: 'only this connection (an id from GET /api/v1/connections)' })
  parseConnection(value: string): number {
    return connectionOption(value);
  }

  @Option({
    flags: '-s, --store <id>',
    description: 'only this store (default: STORE_IDS and the stores learned from order events)',
  })
  parseStore(value: string): string {
    if (!/^[\w-]{1,64}$/.test(value))
      throw new InvalidArgumentError(`--store must be a store id, got ${JSON.stringify(value)}`);
    return value;
  }
}

import { InvalidArgumentError } from 'commander';
import { Command, CommandRunner, Option } from 'nest-commander';
import { cliActor } from '../audit/audit-actor.js';
import { AppConfig } from '../config/app-config.js';
import { printJson } from './output.js';
import { connectionOption, integerOption } from './option-parsers.js';

/** How long a command waits by default for a reconcile run in progress before it gives up. */
export const RECONCILE_WAIT_SECONDS = 300;

interface ReconcileFlags {
  connection?: number;
  store?: string;
  wait?: number;
}

/**
 * `menu-sync reconcile [--connection ID] [--store ID] [--wait SECONDS]`: one run now, after the
 * run in progress if there is one (a cron job's run never just gives way to another); prints its
 * report; exit 0 only when it is `ok`.
 */
@Command({
  name: 'reconcile',
  description: 'Compare the mirror with the upstream now and append the differences to the event log',
})
export class ReconcileCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], flags: ReconcileFlags): Promise<void> {
    const [{ runConnectionCommand }, { ReconcileService }, { AuditLog }] = await Promise.all([
      import('./auth-context.js'),
      import('../reconcile/reconcile.service.js'),
      import('../audit/audit-log.service.js'),
    ]);
    await runConnectionCommand('reconcile', this.config, async (app) => {
      const waitSeconds = flags.wait ?? RECONCILE_WAIT_SECONDS;
      const run = await app
        .get(ReconcileService)
        .run('command', { connectionId: flags.connection, storeId: flags.store }, { waitMs: waitSeconds * 1000 });
      if (run.outcome !== 'skipped') {
        await app.get(AuditLog).record({
          actor: cliActor(),
          action: 'reconcile.ran',
          target: String(run.id),
          detail: {
            outcome: run.outcome,
            events_appended: run.stores.reduce((sum, store) => sum + store.events_appended, 0),
            ...(flags.connection === undefined ? {} : { connection_id: flags.connection }),
            ...(flags.store === undefined ? {} : { store_id: flags.store }),
          },
        });
      }
      printJson({ data: run });
      if (run.outcome === 'skipped')
        process.stderr.write(
          `menu-sync reconcile: another reconcile run was still in progress after ${waitSeconds} s; nothing done (wait longer with --wait SECONDS)\n`,
        );
      if (run.outcome !== 'ok') process.exitCode = 1;
    });
  }

  @Option({ flags: '-c, --connection <id>', description: 'only this connection (an id from GET /api/v1/connections)' })
  parseConnection(value: string): number {
    return connectionOption(value);
  }

  @Option({
    flags: '-w, --wait <seconds>',
    description: `how long to wait for a reconcile run in progress before giving up with exit 1 (default ${RECONCILE_WAIT_SECONDS}; 0: do not wait)`,
  })
  parseWait(value: string): number {
    return integerOption(value, '--wait', 0, 86_400);
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

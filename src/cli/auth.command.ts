import { Command, CommandRunner, SubCommand } from 'nest-commander';
import { ConnectService, OUT_OF_BAND_REDIRECT_URI } from '../auth/connect.service.js';
import { AppConfig } from '../config/app-config.js';
import { ReconcileService } from '../reconcile/reconcile.service.js';
import { printJson, runConnectionCommand } from './auth-context.js';

/** `menu-sync auth url`: the spec's out-of-band flow, first step. */
@SubCommand({ name: 'url', description: 'Print an authorization URL whose code is shown to the user (out-of-band); valid once, for 10 minutes' })
export class AuthUrlCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(): Promise<void> {
    await runConnectionCommand('auth url', this.config, async (app) => {
      const { url } = await app.get(ConnectService).start(OUT_OF_BAND_REDIRECT_URI);
      process.stdout.write(`${url}\n`);
      process.stderr.write('Open this URL, approve, then run `menu-sync auth exchange <code>` with the code shown (within 10 minutes).\n');
    });
  }
}

/**
 * `menu-sync auth exchange <code>`: stores the connection and subscribes it. A code is opaque
 * (base64url may start with `-`): unknown options are taken as the code, not refused.
 */
@SubCommand({
  name: 'exchange',
  arguments: '<code>',
  description: 'Exchange the code shown after `auth url`: store the connection and register its webhook endpoint',
  allowUnknownOptions: true,
})
export class AuthExchangeCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run([code]: string[]): Promise<void> {
    await runConnectionCommand('auth exchange', this.config, async (app) => {
      const connection = await app.get(ConnectService).completeOutOfBand(code);
      printJson({ data: connection });
      if (connection.subscriptions.some((subscription) => subscription.status === 'failed')) {
        process.stderr.write('menu-sync auth exchange: connected, but the webhook endpoint could not be registered; retry with `menu-sync subscribe`\n');
        process.exitCode = 1;
        return;
      }
      // Reconcile right after a connection is made (CONTRACT §8): the daemon does it for connections made through it.
      const run = await app.get(ReconcileService).run('connection', { connectionId: connection.id });
      const appended = run.stores.reduce((sum, store) => sum + store.events_appended, 0);
      process.stderr.write(`menu-sync auth exchange: reconcile ${run.outcome}, ${appended} event(s) appended${
        run.errors.length > 0 ? `: ${run.errors.join('; ')}` : ''}\n`);
    });
  }
}

@Command({ name: 'auth', description: 'Connect an upstream account out-of-band: `auth url`, then `auth exchange <code>`', subCommands: [AuthUrlCommand, AuthExchangeCommand] })
export class AuthCommand extends CommandRunner {
  async run(): Promise<void> {
    process.stderr.write('menu-sync auth: give a subcommand: url | exchange <code>\n');
    process.exitCode = 2;
  }
}

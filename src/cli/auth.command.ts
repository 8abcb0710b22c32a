import { Command, CommandRunner, Option, SubCommand } from 'nest-commander';
import { cliActor } from '../audit/audit-actor.js';
import { AppConfig } from '../config/app-config.js';
import { printJson } from './output.js';
import { connectionOption, integerOption } from './option-parsers.js';
import { RECONCILE_WAIT_SECONDS } from './reconcile.command.js';

/** `menu-sync auth url`: the spec's out-of-band flow, first step. */
@SubCommand({
  name: 'url',
  description: 'Print an authorization URL whose code is shown to the user (out-of-band); valid once, for 10 minutes',
})
export class AuthUrlCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(): Promise<void> {
    const [{ runConnectionCommand }, { ConnectService, OUT_OF_BAND_REDIRECT_URI }] = await Promise.all([
      import('./auth-context.js'),
      import('../oauth/connect.service.js'),
    ]);
    await runConnectionCommand('auth url', this.config, async (app) => {
      const { url } = await app.get(ConnectService).start(OUT_OF_BAND_REDIRECT_URI);
      process.stdout.write(`${url}\n`);
      process.stderr.write(
        'Open this URL, approve, then run `menu-sync auth exchange <code>` with the code shown (within 10 minutes).\n',
      );
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
    const [{ runConnectionCommand }, { ConnectService }, { ReconcileService }] = await Promise.all([
      import('./auth-context.js'),
      import('../oauth/connect.service.js'),
      import('../reconcile/reconcile.service.js'),
    ]);
    await runConnectionCommand('auth exchange', this.config, async (app) => {
      const connection = await app.get(ConnectService).completeOutOfBand(code, cliActor());
      printJson({ data: connection });
      if (connection.subscriptions.some((subscription) => subscription.status === 'failed')) {
        process.stderr.write(
          'menu-sync auth exchange: connected, but the webhook endpoint could not be registered; retry with `menu-sync subscribe`\n',
        );
        process.exitCode = 1;
        return;
      }
      // Reconcile right after a connection is made (reference §8): the daemon does it for connections made through it.
      const run = await app
        .get(ReconcileService)
        .run('connection', { connectionId: connection.id }, { waitMs: RECONCILE_WAIT_SECONDS * 1000 });
      const appended = run.stores.reduce((sum, store) => sum + store.events_appended, 0);
      process.stderr.write(
        `menu-sync auth exchange: reconcile ${run.outcome}, ${appended} event(s) appended${
          run.errors.length > 0 ? `: ${run.errors.join('; ')}` : ''
        }\n`,
      );
    });
  }
}

interface CheckFlags {
  connection?: number;
  store?: string;
  calls?: number;
}

/**
 * `menu-sync auth check`: proves each active connection's token works with authenticated calls
 * (the store's order list), refreshing it when due — as many at once as `--calls` says, the way
 * concurrent reconcile or subscribe calls would meet an expired token. Exit 0 when all answer 2XX.
 */
@SubCommand({
  name: 'check',
  description:
    'Make authenticated upstream calls for each active connection (refreshing its token when due); exit 0 when all succeed',
})
export class AuthCheckCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], flags: CheckFlags): Promise<void> {
    const [{ runConnectionCommand }, { ConnectionRepository }, { UpstreamClient }] = await Promise.all([
      import('./auth-context.js'),
      import('../connections/connection.repository.js'),
      import('../upstream/upstream-client.js'),
    ]);
    await runConnectionCommand('auth check', this.config, async (app) => {
      const connections = (await app.get(ConnectionRepository).list()).filter(
        (connection) =>
          connection.state === 'active' && (flags.connection === undefined || connection.id === flags.connection),
      );
      const storeId = flags.store ?? this.config.STORE_IDS[0] ?? '1';
      const path = this.config.UPSTREAM_ORDERS_PATH.replace('{store_id}', encodeURIComponent(storeId));
      const results = await Promise.all(
        connections.flatMap((connection) =>
          Array.from({ length: flags.calls ?? 1 }, async () => {
            const response = await app
              .get(UpstreamClient)
              .request(connection.id, { method: 'GET', path, versioned: true });
            return { connection_id: connection.id, status: response.status };
          }),
        ),
      );
      printJson({ data: results });
      if (connections.length === 0 || results.some((result) => result.status < 200 || result.status > 299))
        process.exitCode = 1;
    });
  }

  @Option({ flags: '-c, --connection <id>', description: 'only this connection' })
  parseConnection(value: string): number {
    return connectionOption(value);
  }

  @Option({
    flags: '-s, --store <id>',
    description: 'the store whose orders are read (default: the first of STORE_IDS, else 1)',
  })
  parseStore(value: string): string {
    return value;
  }

  @Option({ flags: '--calls <n>', description: 'calls per connection, made at once (default 1, at most 100)' })
  parseCalls(value: string): number {
    return integerOption(value, '--calls', 1, 100);
  }
}

@Command({
  name: 'auth',
  description:
    'Connect an upstream account out-of-band (`auth url`, then `auth exchange <code>`), or check the connections (`auth check`)',
  subCommands: [AuthUrlCommand, AuthExchangeCommand, AuthCheckCommand],
})
export class AuthCommand extends CommandRunner {
  async run(): Promise<void> {
    process.stderr.write('menu-sync auth: give a subcommand: url | exchange <code> | check\n');
    process.exitCode = 2;
  }
}

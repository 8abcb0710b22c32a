import type { INestApplicationContext } from '@nestjs/common';
import { Command, CommandRunner, Option } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { printJson } from './output.js';
import { connectionOption } from './option-parsers.js';

interface SubscribeFlags {
  connection?: number;
}

/** `menu-sync subscribe [--connection ID]`: a fresh webhook endpoint for one connection, or for every one. */
@Command({
  name: 'subscribe',
  description: 'Register a fresh webhook endpoint upstream for a connection (default: every active connection)',
})
export class SubscribeCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], flags: SubscribeFlags): Promise<void> {
    const [{ runConnectionCommand }, { subscriptionView }, { SubscriptionService }] = await Promise.all([
      import('./auth-context.js'),
      import('../oauth/connection-view.js'),
      import('../subscriptions/subscription.service.js'),
    ]);
    await runConnectionCommand('subscribe', this.config, async (app) => {
      const ids = flags.connection === undefined ? await activeConnections(app) : [flags.connection];
      if (ids.length === 0) {
        process.stderr.write(
          'menu-sync subscribe: there is no active connection: connect one at /auth/connect or with `menu-sync auth url`\n',
        );
        process.exitCode = 1;
        return;
      }
      const subscriptions = [];
      for (const id of ids) subscriptions.push(await app.get(SubscriptionService).subscribe(id));
      printJson({
        data: subscriptions.map((subscription) => ({
          connection_id: subscription.connectionId,
          ...subscriptionView(subscription),
        })),
      });
      if (subscriptions.some((subscription) => subscription.status === 'failed')) process.exitCode = 1;
    });
  }

  @Option({ flags: '-c, --connection <id>', description: 'the connection (an id from GET /api/v1/connections)' })
  parseConnection(value: string): number {
    return connectionOption(value);
  }
}

/** Every connection that can call the upstream; the others are named on stderr. */
async function activeConnections(app: INestApplicationContext): Promise<number[]> {
  const { ConnectionsService } = await import('../oauth/connections.service.js');
  const connections = (await app.get(ConnectionsService).list()).data;
  for (const connection of connections.filter((item) => item.state !== 'active')) {
    process.stderr.write(
      `menu-sync subscribe: skipping connection ${connection.id} (${connection.state}): authorize it again first\n`,
    );
  }
  return connections.filter((connection) => connection.state === 'active').map((connection) => connection.id);
}

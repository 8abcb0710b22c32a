import { Injectable } from '@nestjs/common';
import { SubscriptionRepository } from '../upstream/subscription.repository.js';
import type { Connection } from './connection.js';
import { connectionView, ConnectionView } from './connection-view.js';
import { ConnectionRepository } from './connection.repository.js';

/** The connections with their subscriptions and token state, as `GET /api/v1/connections` shows them. */
@Injectable()
export class ConnectionsService {
  constructor(
    private readonly connections: ConnectionRepository,
    private readonly subscriptions: SubscriptionRepository,
  ) {}

  async list(): Promise<{ data: ConnectionView[] }> {
    const [connections, subscriptions] = await Promise.all([this.connections.list(), this.subscriptions.list()]);
    return { data: connections.map((connection) => connectionView(connection, subscriptions, this.modeOf(connection))) };
  }

  async view(connection: Connection): Promise<ConnectionView> {
    return connectionView(connection, await this.subscriptions.list([connection.id]), this.modeOf(connection));
  }

  /** A connection made with the built-in emulator of the zero-config sandbox, or with a configured upstream. */
  private modeOf(connection: Connection): ConnectionView['mode'] {
    return connection.sandbox ? 'emulator' : 'configured';
  }
}

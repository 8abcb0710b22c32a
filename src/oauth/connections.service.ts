import { Injectable, OnModuleInit } from '@nestjs/common';
import { MetricsService } from '../observability/metrics.service.js';
import { SubscriptionRepository } from '../subscriptions/subscription.repository.js';
import type { Connection } from '../connections/connection.js';
import { connectionView, ConnectionView } from './connection-view.js';
import { ConnectionRepository } from '../connections/connection.repository.js';

/** The connections with their subscriptions and token state, as `GET /api/v1/connections` shows them. */
@Injectable()
export class ConnectionsService implements OnModuleInit {
  constructor(
    private readonly connections: ConnectionRepository,
    private readonly subscriptions: SubscriptionRepository,
    private readonly metrics: MetricsService,
  ) {}

  /** `menu_sync_connections{state}` is counted at each scrape; both states are always present, so alerts see 0. */
  onModuleInit(): void {
    const gauge = this.metrics.connections;
    (gauge as unknown as { collect: () => Promise<void> }).collect = async () => {
      const counts: Record<string, number> = { active: 0, reauthorization_required: 0 };
      for (const connection of await this.connections.list().catch(() => []))
        counts[connection.state] = (counts[connection.state] ?? 0) + 1;
      for (const [state, count] of Object.entries(counts)) gauge.set({ state }, count);
    };
  }

  async list(): Promise<{ data: ConnectionView[] }> {
    const [connections, subscriptions] = await Promise.all([this.connections.list(), this.subscriptions.list()]);
    return {
      data: connections.map((connection) => connectionView(connection, subscriptions, this.modeOf(connection))),
    };
  }

  async view(connection: Connection): Promise<ConnectionView> {
    return connectionView(connection, await this.subscriptions.list([connection.id]), this.modeOf(connection));
  }

  /** A connection made with the built-in emulator of the zero-config sandbox, or with a configured upstream. */
  private modeOf(connection: Connection): ConnectionView['mode'] {
    return connection.sandbox ? 'emulator' : 'configured';
  }
}

import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';

export type SubscriptionStatus = 'registered' | 'failed';

/** A webhook endpoint registered (or attempted) upstream for a connection; the key is never here. */
export interface Subscription {
  id: number;
  connectionId: number;
  webhookKeyId: number | null;
  /** The callback URI with its key replaced by `[redacted]`. */
  callbackUri: string;
  enabledEvents: string[];
  upstreamId: string | null;
  status: SubscriptionStatus;
  lastError: string | null;
  createdAt: Date;
}

export type NewSubscription = Omit<Subscription, 'id' | 'createdAt'>;

interface SubscriptionRow {
  id: string;
  connection_id: string;
  webhook_key_id: string | null;
  callback_uri: string;
  enabled_events: string[];
  upstream_id: string | null;
  status: SubscriptionStatus;
  last_error: string | null;
  created_at: Date;
}

@Injectable()
export class SubscriptionRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async create(subscription: NewSubscription): Promise<Subscription> {
    const [row]: SubscriptionRow[] = await this.dataSource.query(
      `INSERT INTO subscriptions (connection_id, webhook_key_id, callback_uri, enabled_events, upstream_id, status, last_error)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
      [
        subscription.connectionId,
        subscription.webhookKeyId,
        subscription.callbackUri,
        subscription.enabledEvents,
        subscription.upstreamId,
        subscription.status,
        subscription.lastError,
      ],
    );
    return toSubscription(row);
  }

  /** The subscriptions of the given connections (all of them when none given), oldest first. */
  async list(connectionIds?: number[]): Promise<Subscription[]> {
    const rows: SubscriptionRow[] =
      connectionIds === undefined
        ? await this.dataSource.query(`SELECT * FROM subscriptions ORDER BY connection_id, id`)
        : await this.dataSource.query(
            `SELECT * FROM subscriptions WHERE connection_id = ANY($1::bigint[]) ORDER BY connection_id, id`,
            [connectionIds],
          );
    return rows.map(toSubscription);
  }

  /** Forgets the subscriptions of a connection being retired (their keys are expired by then). */
  async deleteOf(manager: EntityManager, connectionId: number): Promise<void> {
    await manager.query(`DELETE FROM subscriptions WHERE connection_id = $1`, [connectionId]);
  }
}

function toSubscription(row: SubscriptionRow): Subscription {
  return {
    id: Number(row.id),
    connectionId: Number(row.connection_id),
    webhookKeyId: row.webhook_key_id === null ? null : Number(row.webhook_key_id),
    callbackUri: row.callback_uri,
    enabledEvents: row.enabled_events,
    upstreamId: row.upstream_id,
    status: row.status,
    lastError: row.last_error,
    createdAt: row.created_at,
  };
}

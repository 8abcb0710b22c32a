import { Logger } from '@nestjs/common';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { directClientConfig, sessionsOf } from './database-sessions.js';

const RETRY_MS = 1000;

/**
 * LISTEN on one channel, on a connection of its own (not one of the pool's; on DATABASE_DIRECT_URL),
 * while anyone subscribes: every notification calls every subscriber, with its payload. A lost connection is opened again after
 * a second while there are subscribers; what was notified meanwhile is lost, so a subscriber keeps
 * a poll of its own as the fallback.
 */
export class ChannelListener {
  private readonly subscribers = new Set<(payload: string) => void>();
  private client?: pg.Client;
  private opening?: Promise<void>;
  private retry?: NodeJS.Timeout;

  constructor(
    private readonly dataSource: DataSource,
    private readonly channel: string,
    private readonly logger: Logger,
  ) {}

  subscribe(subscriber: (payload: string) => void): () => void {
    this.subscribers.add(subscriber);
    this.open();
    return () => {
      this.subscribers.delete(subscriber);
      if (this.subscribers.size === 0) this.close();
    };
  }

  private open(): void {
    if (this.client !== undefined || this.opening !== undefined || this.subscribers.size === 0) return;
    // A retry due after the data source was closed (at shutdown) has no pool to take settings from.
    const settings = this.dataSource.isInitialized ? directClientConfig(this.dataSource) : undefined;
    if (settings === undefined) return;
    clearTimeout(this.retry);
    this.retry = undefined;
    const client = new pg.Client({ ...settings, application_name: 'menu-sync listen' });
    this.opening = (async () => {
      client.on('notification', (message) => {
        for (const subscriber of [...this.subscribers]) subscriber(message.payload ?? '');
      });
      client.on('error', (error) => this.lost(client, error));
      // A direct URL found behind a transaction pooler would LISTEN on a backend it soon loses.
      await sessionsOf(this.dataSource).probe?.();
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
      this.client = client;
      if (this.subscribers.size === 0) this.close();
    })()
      .catch((error) => this.lost(client, error))
      .finally(() => {
        this.opening = undefined;
      });
  }

  private lost(client: pg.Client, error: unknown): void {
    client.removeAllListeners('notification');
    client.end().catch(() => undefined);
    if (this.client === client) this.client = undefined;
    if (this.subscribers.size === 0) return;
    this.logger.warn({ msg: `LISTEN ${this.channel} failed; polling until it is back`, err: String(error) });
    this.retry ??= setTimeout(() => {
      this.retry = undefined;
      this.open();
    }, RETRY_MS).unref();
  }

  private close(): void {
    clearTimeout(this.retry);
    this.retry = undefined;
    const client = this.client;
    this.client = undefined;
    if (client === undefined) return;
    client.removeAllListeners('notification');
    client.end().catch(() => undefined);
  }
}

import { hash } from 'node:crypto';
import { Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { LOCAL_WEBHOOK_KEY_FILE, localSecret } from '../config/local-secrets.js';
import { WebhookKeyRepository } from './webhook-key.repository.js';

const REFRESH_MS = 5000;

export function hashWebhookKey(key: string): Buffer {
  return hash('sha256', key, 'buffer');
}

/**
 * Resolves a presented webhook key to a non-secret key id (`env:N` or `key:N`) without a database
 * round trip: keys are held as SHA-256 hashes, refreshed every few seconds and after each change.
 */
@Injectable()
export class WebhookKeyRegistry implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(WebhookKeyRegistry.name);
  private readonly configured: Map<string, string>;
  private stored = new Map<string, string>();
  /** Keys learned since the last refresh began, with the order in which they were learned. */
  private readonly learned = new Map<string, { keyId: string; sequence: number }>();
  private sequence = 0;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly config: AppConfig,
    private readonly repository: WebhookKeyRepository,
  ) {
    this.configured = new Map(
      config.WEBHOOK_KEYS.map((key, i) => [hashWebhookKey(key).toString('hex'), `env:${i + 1}`]),
    );
  }

  async onModuleInit(): Promise<void> {
    if (this.config.embeddedDatabase) {
      const key = await localSecret(this.config.DATA_DIR, LOCAL_WEBHOOK_KEY_FILE);
      this.configured.set(hashWebhookKey(key).toString('hex'), 'local');
      this.logger.log(`local webhook key in ${LOCAL_WEBHOOK_KEY_FILE} under DATA_DIR: POST /webhooks/<that key>`);
    }
    await this.refresh().catch((error) => this.logger.warn({ msg: 'could not load webhook keys', err: error }));
    this.timer = setInterval(() => {
      this.refresh().catch((error) => this.logger.warn({ msg: 'could not refresh webhook keys', err: error }));
    }, REFRESH_MS);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
  }

  resolve(key: string): string | null {
    // One call, straight to hex: resolving runs for every delivery.
    const hex = hash('sha256', key, 'hex');
    return this.configured.get(hex) ?? this.stored.get(hex) ?? null;
  }

  /**
   * Accepts a key just stored (committed) at once, without waiting for the next refresh. A refresh
   * whose read began before the key was learned keeps it too, since that read may not have seen it.
   */
  learn(keyHash: Buffer, id: number): void {
    const hex = keyHash.toString('hex');
    this.learned.set(hex, { keyId: `key:${id}`, sequence: ++this.sequence });
    this.stored.set(hex, `key:${id}`);
  }

  /** Stops accepting a key at once (it was expired in the database). */
  forget(keyHash: Buffer): void {
    const hex = keyHash.toString('hex');
    this.learned.delete(hex);
    this.stored.delete(hex);
  }

  async refresh(): Promise<void> {
    const readFrom = this.sequence;
    const keys = await this.repository.listActive();
    const stored = new Map(keys.map((key) => [key.keyHash.toString('hex'), `key:${key.id}`]));
    for (const [hex, entry] of this.learned) {
      if (entry.sequence > readFrom) stored.set(hex, entry.keyId);
      else this.learned.delete(hex);
    }
    this.stored = stored;
  }
}

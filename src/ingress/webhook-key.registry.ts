import { createHash } from 'node:crypto';
import { Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { LOCAL_WEBHOOK_KEY_FILE, localSecret } from '../config/local-secrets.js';
import { WebhookKeyRepository } from './webhook-key.repository.js';

const REFRESH_MS = 5000;

export function hashWebhookKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
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
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly config: AppConfig,
    private readonly repository: WebhookKeyRepository,
  ) {
    this.configured = new Map(config.WEBHOOK_KEYS.map((key, i) => [hashWebhookKey(key).toString('hex'), `env:${i + 1}`]));
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
    const hash = hashWebhookKey(key).toString('hex');
    return this.configured.get(hash) ?? this.stored.get(hash) ?? null;
  }

  async refresh(): Promise<void> {
    const keys = await this.repository.listActive();
    this.stored = new Map(keys.map((key) => [key.keyHash.toString('hex'), `key:${key.id}`]));
  }
}

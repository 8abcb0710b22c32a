import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ServiceUnavailableError } from '../common/app-error.js';
import type { Principal } from '../common/principal.js';
import type { StoredTokens } from '../common/stored-tokens.js';
import { ChannelListener } from '../database/channel-listener.js';
import { ApiTokenCredential, ApiTokenRepository } from './api-token.repository.js';

export const TOKENS_CHANNEL = 'menu_sync_api_tokens';
/** The fallback to LISTEN: the tokens are read again this often. */
export const TOKENS_POLL_MS = 2000;
/**
 * Stored tokens are refused (503) when the last read that succeeded began longer ago than this: a
 * token revoked anywhere is then refused here within this much (plus one read), as §12 requires (5 s).
 */
export const TOKENS_STALE_MS = 4500;
/** `last_used_at` is written at most this often per token. */
export const LAST_USED_EVERY_MS = 60_000;

interface Entry {
  principal: Principal;
  expiresAt: number | null;
}

/**
 * The stored tokens as this process last read them, keyed by digest, read again at every change
 * (NOTIFY on `menu_sync_api_tokens`) and every TOKENS_POLL_MS: what ApiTokenGuard asks.
 */
@Injectable()
export class TokenStore implements StoredTokens, OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(TokenStore.name);
  private readonly listener: ChannelListener;
  private byDigest: Map<string, Entry> | null = null;
  /** When the read that last succeeded began (ms). */
  private readAt = 0;
  private reading: Promise<void> | null = null;
  private again = false;
  private timer?: NodeJS.Timeout;
  private unlisten: (() => void) | null = null;
  private readonly usedAt = new Map<string, number>();
  private failing = false;
  private stopped = false;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly repository: ApiTokenRepository,
  ) {
    this.listener = new ChannelListener(dataSource, TOKENS_CHANNEL, this.logger);
  }

  async onApplicationBootstrap(): Promise<void> {
    this.unlisten = this.listener.subscribe(() => void this.refresh());
    this.timer = setInterval(() => void this.refresh(), TOKENS_POLL_MS).unref();
    await this.refresh();
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.unlisten?.();
    this.unlisten = null;
  }

  get any(): boolean {
    return this.byDigest === null || this.byDigest.size > 0;
  }

  principal(digest: Buffer, now: number): Principal | undefined {
    if (this.byDigest === null || now - this.readAt > TOKENS_STALE_MS) {
      // Only a stored token is refused: one of API_TOKENS was matched before this is asked.
      if (this.byDigest?.size === 0) return undefined;
      throw new ServiceUnavailableError(
        'Stored tokens cannot be checked now (the database has not answered lately); try again shortly.',
        2,
      );
    }
    const entry = this.byDigest.get(digest.toString('base64'));
    if (entry === undefined || (entry.expiresAt !== null && entry.expiresAt <= now)) return undefined;
    this.used(entry.principal.id, now);
    return entry.principal;
  }

  /** Reads the tokens again now (a read already under way is followed by another). */
  refresh(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.reading !== null) {
      this.again = true;
      return this.reading;
    }
    this.reading = (async () => {
      do {
        this.again = false;
        const startedAt = Date.now();
        try {
          this.byDigest = new Map((await this.repository.credentials()).map((token) => this.entry(token)));
          this.readAt = startedAt;
          if (this.failing) this.logger.log('Reading the stored API tokens works again');
          this.failing = false;
        } catch (error) {
          // Told once per outage, not at every poll.
          if (!this.failing && !this.stopped)
            this.logger.warn({
              msg: `Reading the stored API tokens failed; retrying every ${TOKENS_POLL_MS} ms, stored tokens refused after ${TOKENS_STALE_MS} ms`,
              err: String(error),
            });
          this.failing = true;
          return;
        }
      } while (this.again);
    })().finally(() => {
      this.reading = null;
    });
    return this.reading;
  }

  private entry(token: ApiTokenCredential): [string, Entry] {
    return [
      token.digest.toString('base64'),
      {
        principal: { role: token.role, ownerIds: token.ownerIds, id: token.id, name: token.name },
        expiresAt: token.expiresAt?.getTime() ?? null,
      },
    ];
  }

  /** Off the request's path: at most one UPDATE per token a minute, a failure only logged. */
  private used(id: string, now: number): void {
    if (now - (this.usedAt.get(id) ?? -Infinity) < LAST_USED_EVERY_MS) return;
    this.usedAt.set(id, now);
    this.repository.touch(id, new Date(now)).catch((error: unknown) => {
      this.logger.warn({ msg: 'Noting a stored token’s last use failed', token_id: id, err: String(error) });
    });
  }
}

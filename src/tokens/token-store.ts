import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ServiceUnavailableError } from '../common/app-error.js';
import type { Principal } from '../common/principal.js';
import type { StoredTokens } from '../common/stored-tokens.js';
import { ListenedRefresh } from '../database/listened-refresh.js';
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
  private readonly refresher: ListenedRefresh;
  private byDigest: Map<string, Entry> | null = null;
  /** When the read that last succeeded began (ms). */
  private readAt = 0;
  private readonly usedAt = new Map<string, number>();

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly repository: ApiTokenRepository,
  ) {
    this.refresher = new ListenedRefresh(dataSource, {
      channel: TOKENS_CHANNEL,
      pollMs: TOKENS_POLL_MS,
      logger: this.logger,
      read: async () => {
        const startedAt = Date.now();
        this.byDigest = new Map((await this.repository.credentials()).map((token) => this.entry(token)));
        this.readAt = startedAt;
      },
      failed: `Reading the stored API tokens failed; retrying every ${TOKENS_POLL_MS} ms, stored tokens refused after ${TOKENS_STALE_MS} ms`,
      recovered: 'Reading the stored API tokens works again',
    });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.refresher.start();
  }

  onApplicationShutdown(): void {
    this.refresher.stop();
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
    return this.refresher.refresh();
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

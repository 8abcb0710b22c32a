import { Inject, Injectable, Logger } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { expiresAt, refreshDueAt } from '../connections/connection.js';
import type { Connection, TokenSet } from '../connections/connection.js';
import { ConnectionRepository } from '../connections/connection.repository.js';
import { MetricsService } from '../observability/metrics.service.js';
import { OAuthClient } from './oauth-client.js';
import type { OAuthApplication } from './oauth-client.js';
import { SingleFlight } from './single-flight.js';
import {
  NoUpstreamApplicationError,
  OAuthGrantError,
  ReauthorizationRequiredError,
  UnknownConnectionError,
  UpstreamUnavailableError,
} from './upstream.errors.js';
import { UPSTREAM_SETTINGS } from './upstream-settings.js';
import type { UpstreamSettings } from './upstream-settings.js';
import { UPSTREAM_TIMINGS } from './upstream-timings.js';
import type { UpstreamTimings } from './upstream-timings.js';

/** After an early refresh failed (token endpoint down), calls use the still-valid token this long before trying again. */
const EARLY_REFRESH_PAUSE_MS = 30_000;

/** An access token to send, its `token_version` (to report a rejection) and where to send it. */
export interface AccessGrant {
  token: string;
  version: number;
  baseUrl: string;
}

interface CachedGrant {
  grant: AccessGrant;
  dueAtMs: number;
  cachedAtMs: number;
}

type LockedOutcome = { connection: Connection } | { reauthorization: string };

/**
 * Hands out access tokens that are not due for refresh, refreshing first when they are (docs/reference.md
 * §6). However many callers find a token due or rejected at once, one refresh grant is sent:
 * within this process one flight per connection, across processes the connection's row lock,
 * under which the token is read again and a refresh another process already made is used as is.
 */
@Injectable()
export class TokenRefresher {
  private readonly logger = new Logger(TokenRefresher.name);
  private readonly cache = new Map<number, CachedGrant>();
  private readonly refreshPausedUntil = new Map<number, number>();
  private readonly loads = new SingleFlight<number, AccessGrant>();
  private readonly refreshes = new SingleFlight<number, AccessGrant>();

  constructor(
    private readonly connections: ConnectionRepository,
    private readonly oauth: OAuthClient,
    private readonly metrics: MetricsService,
    @Inject(UPSTREAM_SETTINGS) private readonly settings: UpstreamSettings | null,
    @Inject(UPSTREAM_TIMINGS) private readonly timings: UpstreamTimings,
  ) {}

  /** A token not due for refresh. Throws ReauthorizationRequiredError, without any call, for a connection in that state. */
  async accessToken(connectionId: number): Promise<AccessGrant> {
    return this.cached(connectionId) ?? this.loads.run(connectionId, () => this.load(connectionId));
  }

  /** The upstream answered 401 to the token of `rejectedVersion`: a newer token, refreshed unless another caller did. */
  async refreshAfterRejection(connectionId: number, rejectedVersion: number): Promise<AccessGrant> {
    const cached = this.cached(connectionId);
    if (cached !== undefined && cached.version > rejectedVersion) return cached;
    const grant = await this.refreshes.run(connectionId, () => this.refreshLocked(connectionId, rejectedVersion, true));
    if (grant.version > rejectedVersion) return grant;
    // The flight joined had been started for an older version and ended on the very token rejected.
    return this.refreshes.run(connectionId, () => this.refreshLocked(connectionId, rejectedVersion, true));
  }

  /** The connection's tokens were replaced (a new authorization) or it is gone: this process reads them again. */
  forget(connectionId: number): void {
    this.cache.delete(connectionId);
    this.refreshPausedUntil.delete(connectionId);
  }

  private async load(connectionId: number): Promise<AccessGrant> {
    const connection = await this.connections.find(connectionId);
    if (connection === null) throw new UnknownConnectionError(connectionId);
    if (connection.state === 'reauthorization_required')
      throw new ReauthorizationRequiredError(connectionId, connection.lastError ?? undefined);
    if (!this.isDue(connection)) return this.remember(connection);
    const current = { token: connection.accessToken, version: connection.tokenVersion, baseUrl: connection.baseUrl };
    const unexpired = this.timings.now() < expiresAt(connection).getTime();
    // After a failed early refresh, the next attempt waits: every call would otherwise retry it.
    if (unexpired && this.timings.now() < (this.refreshPausedUntil.get(connectionId) ?? 0)) return current;
    try {
      const grant = await this.refreshes.run(connectionId, () =>
        this.refreshLocked(connectionId, connection.tokenVersion, false),
      );
      this.refreshPausedUntil.delete(connectionId);
      return grant;
    } catch (error) {
      // Due is not expired: while the token endpoint is down, the token still works until its expiry.
      if (!(error instanceof UpstreamUnavailableError) || !unexpired) throw error;
      this.refreshPausedUntil.set(connectionId, this.timings.now() + EARLY_REFRESH_PAUSE_MS);
      this.logger.warn(
        `connection ${connectionId}: the token could not be refreshed ahead of expiry; using it until it expires`,
      );
      return current;
    }
  }

  /**
   * Under the row lock: the stored token when it moved past `seenVersion` (or, unless `rejected`,
   * was never due) and is not due now; else a refresh grant, saved in the same transaction. An
   * `invalid_grant` is recorded in that transaction too, which therefore returns instead of throwing.
   */
  private async refreshLocked(connectionId: number, seenVersion: number, rejected: boolean): Promise<AccessGrant> {
    this.cache.delete(connectionId);
    const outcome = await this.connections.withLocked(
      connectionId,
      async (connection, manager): Promise<LockedOutcome> => {
        if (connection.state === 'reauthorization_required')
          return { reauthorization: connection.lastError ?? 'reauthorization required' };
        const moved = connection.tokenVersion > seenVersion;
        if ((moved || !rejected) && !this.isDue(connection)) return { connection };
        if (connection.refreshToken === null)
          return this.requireReauthorization(manager, connectionId, 'no refresh token is stored');
        const tokens = await this.refreshGrant(connection);
        if (tokens instanceof OAuthGrantError) {
          return this.requireReauthorization(
            manager,
            connectionId,
            `invalid_grant${tokens.description ? `: ${tokens.description}` : ''}`,
          );
        }
        return { connection: await this.connections.saveTokens(manager, connectionId, tokens) };
      },
    );
    if ('reauthorization' in outcome) throw new ReauthorizationRequiredError(connectionId, outcome.reauthorization);
    return this.remember(outcome.connection);
  }

  /** The refreshed tokens, or the `invalid_grant` refusal; any other failure is thrown, the connection left active. */
  private async refreshGrant(connection: Connection): Promise<TokenSet | OAuthGrantError> {
    try {
      const tokens = await this.oauth.refresh(this.application(connection), connection.refreshToken!);
      this.metrics.tokenRefreshes.inc({ result: 'success' });
      this.logger.log(`refreshed the tokens of connection ${connection.id}`);
      return tokens;
    } catch (error) {
      if (error instanceof OAuthGrantError && error.error === 'invalid_grant') {
        this.metrics.tokenRefreshes.inc({ result: 'invalid_grant' });
        return error;
      }
      this.metrics.tokenRefreshes.inc({ result: 'error' });
      throw error;
    }
  }

  private async requireReauthorization(
    manager: EntityManager,
    connectionId: number,
    reason: string,
  ): Promise<LockedOutcome> {
    await this.connections.setState(connectionId, 'reauthorization_required', reason, manager);
    this.logger.warn(`connection ${connectionId} needs to be authorized again: ${reason}`);
    return { reauthorization: reason };
  }

  /** This process's application, only for connections made with its authorization server: the secret goes nowhere else. */
  private application(connection: Connection): OAuthApplication {
    if (this.settings === null) throw new NoUpstreamApplicationError();
    if (connection.authUrl !== this.settings.authUrl) throw new NoUpstreamApplicationError(connection.authUrl);
    return { authUrl: connection.authUrl, clientId: this.settings.clientId, clientSecret: this.settings.clientSecret };
  }

  private isDue(connection: Connection): boolean {
    return this.timings.now() >= refreshDueAt(connection).getTime();
  }

  private cached(connectionId: number): AccessGrant | undefined {
    const entry = this.cache.get(connectionId);
    const now = this.timings.now();
    if (entry === undefined || now >= entry.dueAtMs || now - entry.cachedAtMs >= this.timings.tokenCacheMs)
      return undefined;
    return entry.grant;
  }

  /** Caches the connection's token, unless a newer one is cached already (a slow read racing a refresh). */
  private remember(connection: Connection): AccessGrant {
    const grant: AccessGrant = {
      token: connection.accessToken,
      version: connection.tokenVersion,
      baseUrl: connection.baseUrl,
    };
    const current = this.cache.get(connection.id);
    if (current === undefined || current.grant.version <= grant.version) {
      this.cache.set(connection.id, {
        grant,
        dueAtMs: refreshDueAt(connection).getTime(),
        cachedAtMs: this.timings.now(),
      });
    }
    return grant;
  }
}

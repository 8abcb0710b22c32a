import { randomBytes } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import type { AuditActor } from '../audit/audit-actor.js';
import { AuditLog } from '../audit/audit-log.service.js';
import { OAuthClient } from '../upstream/oauth-client.js';
import { OAuthGrantError, UpstreamNotConfiguredError, UpstreamUnavailableError } from '../upstream/upstream.errors.js';
import { SubscriptionService } from '../subscriptions/subscription.service.js';
import { UPSTREAM_SETTINGS } from '../upstream/upstream-settings.js';
import type { UpstreamSettings } from '../upstream/upstream-settings.js';
import {
  AuthorizationDeniedError,
  CodeExchangeError,
  InvalidCallbackError,
  InvalidStateError,
  NoPendingAuthorizationError,
} from './oauth.errors.js';
import { AuthorizationStateRepository, hashState, PendingAuthorization } from './authorization-state.repository.js';
import type { TokenSet } from '../connections/connection.js';
import type { ConnectionView } from './connection-view.js';
import { ConnectionRepository } from '../connections/connection.repository.js';
import { ConnectionsService } from './connections.service.js';

/** The spec's out-of-band redirect URI: the authorization server shows the code instead of redirecting. */
export const OUT_OF_BAND_REDIRECT_URI = 'urn:ietf:wg:oauth:2.0:oob';

/** How long an authorization request can be answered. */
export const AUTHORIZATION_TTL_SECONDS = 600;

/** What the authorization server sends back to the redirect URI (RFC 6749 §4.1.2). */
export interface AuthorizationCallback {
  code?: unknown;
  state?: unknown;
  error?: unknown;
  [parameter: string]: unknown;
}

/** Emitted once a connection is stored and subscribed: reconcile runs right after (docs/reference.md §8). */
export const CONNECTION_CREATED = 'connection.created';

/**
 * The connect flow (docs/reference.md §6): an authorization request with a single-use state and a PKCE
 * verifier, then, on the callback, the code exchange, the stored connection and its subscription.
 * A refused callback stores nothing.
 */
@Injectable()
export class ConnectService {
  private readonly logger = new Logger(ConnectService.name);

  constructor(
    @Inject(UPSTREAM_SETTINGS) private readonly settings: UpstreamSettings | null,
    private readonly authorizations: AuthorizationStateRepository,
    private readonly oauth: OAuthClient,
    private readonly connections: ConnectionRepository,
    private readonly views: ConnectionsService,
    private readonly subscriptions: SubscriptionService,
    private readonly events: EventEmitter2,
    private readonly audit: AuditLog,
  ) {}

  /** A new authorization request: the URL to send the user to, and its state. */
  async start(redirectUri?: string): Promise<{ url: string; state: string }> {
    const settings = this.upstream();
    const state = randomBytes(32).toString('base64url');
    const verifier = this.oauth.generateVerifier();
    const redirect = redirectUri ?? settings.redirectUri;
    await this.authorizations.prune();
    await this.authorizations.create(hashState(state), verifier, redirect, AUTHORIZATION_TTL_SECONDS);
    const codeChallenge = this.oauth.challengeOf(verifier);
    return { url: this.oauth.authorizationUrl(settings, { redirectUri: redirect, state, codeChallenge }), state };
  }

  /** The redirect back from the authorization server. */
  async complete(callback: AuthorizationCallback, actor: AuditActor): Promise<ConnectionView> {
    const settings = this.upstream();
    const state = typeof callback.state === 'string' && callback.state !== '' ? callback.state : undefined;
    if (callback.error !== undefined) {
      // The request is answered, even if refused: its state must not serve again.
      if (state !== undefined) await this.authorizations.consume(hashState(state));
      throw new AuthorizationDeniedError(oauthErrorCode(callback.error));
    }
    if (state === undefined) throw new InvalidCallbackError('The callback has no state.', 'state');
    if (typeof callback.code !== 'string' || callback.code === '')
      throw new InvalidCallbackError('The callback has no code.', 'code');
    const pending = await this.authorizations.consume(hashState(state));
    if (pending === null) throw new InvalidStateError();
    return this.connect(settings, callback.code, pending, actor);
  }

  /** `menu-sync auth exchange <code>`: answers the newest pending out-of-band request. */
  async completeOutOfBand(code: string, actor: AuditActor): Promise<ConnectionView> {
    const settings = this.upstream();
    const pending = await this.authorizations.consumeNewest(OUT_OF_BAND_REDIRECT_URI);
    if (pending === null) throw new NoPendingAuthorizationError();
    return this.connect(settings, code, pending, actor);
  }

  private async connect(
    settings: UpstreamSettings,
    code: string,
    pending: PendingAuthorization,
    actor: AuditActor,
  ): Promise<ConnectionView> {
    const exchanged = await this.exchange(settings, code, pending);
    const tokens = {
      ...exchanged,
      ownerId: exchanged.ownerId ?? (await this.oauth.resourceOwner(settings.authUrl, exchanged.accessToken)),
    };
    const connection = await this.connections.create({
      authUrl: settings.authUrl,
      baseUrl: settings.baseUrl,
      scopes: settings.scopes,
      tokens,
      sandbox: settings.mode === 'emulator',
    });
    this.logger.log({
      msg: `connection ${connection.id} created`,
      connectionId: connection.id,
      scopes: connection.scopes,
    });
    await this.audit.record({ actor, action: 'connection.created', target: String(connection.id) });
    await this.subscriptions.subscribe(connection.id);
    this.events.emit(CONNECTION_CREATED, { connectionId: connection.id });
    return this.views.view(connection);
  }

  private async exchange(settings: UpstreamSettings, code: string, pending: PendingAuthorization): Promise<TokenSet> {
    try {
      return await this.oauth.exchangeCode(settings, code, pending.redirectUri, pending.codeVerifier);
    } catch (error) {
      const reason =
        error instanceof OAuthGrantError
          ? `the authorization server answered ${oauthErrorCode(error.error)}`
          : error instanceof UpstreamUnavailableError
            ? 'the authorization server could not be reached'
            : 'the authorization server gave an unexpected answer';
      this.logger.warn({
        msg: `code exchange failed: ${reason}`,
        errorType: (error as object | null)?.constructor?.name,
      });
      throw new CodeExchangeError(reason);
    }
  }

  private upstream(): UpstreamSettings {
    if (this.settings === null) throw new UpstreamNotConfiguredError();
    return this.settings;
  }
}

/** An OAuth error code as RFC 6749 allows it (%x20-21 / %x23-5B / %x5D-7E), else a placeholder: never echo arbitrary input. */
function oauthErrorCode(value: unknown): string {
  return typeof value === 'string' && /^[\x20-\x21\x23-\x5B\x5D-\x7E]{1,64}$/.test(value) ? value : 'an error';
}

import { randomBytes } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import type { AuditActor } from '../audit/audit-actor.js';
import { AuditLog } from '../audit/audit-log.service.js';
import { OAuthClient } from '../upstream/oauth-client.js';
import { TokenRefresher } from '../upstream/token-refresher.js';
import { OAuthGrantError, UpstreamNotConfiguredError, UpstreamUnavailableError } from '../upstream/upstream.errors.js';
import { SubscriptionRepository } from '../subscriptions/subscription.repository.js';
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
import type { Connection, TokenSet } from '../connections/connection.js';
import type { ConnectionView } from './connection-view.js';
import { ConnectionRepository } from '../connections/connection.repository.js';
import { ConnectionsService } from './connections.service.js';

/** The spec's out-of-band redirect URI: the authorization server shows the code instead of redirecting. */
export const OUT_OF_BAND_REDIRECT_URI = 'urn:ietf:wg:oauth:2.0:oob';

const PROCESS_STARTED_AT = Math.floor(performance.timeOrigin);

/** How long an authorization request can be answered. */
export const AUTHORIZATION_TTL_SECONDS = 600;

/** What the authorization server sends back to the redirect URI (RFC 6749 §4.1.2). */
export interface AuthorizationCallback {
  code?: unknown;
  state?: unknown;
  error?: unknown;
  [parameter: string]: unknown;
}

/** Emitted once a connection is stored (or re-authorized) and subscribed: reconcile runs right after (docs/reference.md §8). */
export const CONNECTION_CREATED = 'connection.created';

/**
 * What a completed connect did: made a connection, or gave an owner's existing connection the new
 * authorization's tokens (`replaced`); `retired`: that owner's other connections, forgotten, with
 * the upstream ids of the webhook endpoints they leave behind.
 */
export interface ConnectResult {
  outcome: 'created' | 'replaced';
  /** When the connection was stored, by this process's clock: the reconcile run it starts begins after. */
  at: string;
  connection: ConnectionView;
  retired: Array<{ id: number; upstream_endpoints: string[] }>;
}

/**
 * The connect flow (docs/reference.md §6): an authorization request with a single-use state and a PKCE
 * verifier, then, on the callback, the code exchange, the stored connection and its subscription.
 * An owner is connected once: a new authorization of an owner already connected replaces the
 * tokens of that connection and keeps its subscription. A refused callback stores nothing.
 */
@Injectable()
export class ConnectService {
  private readonly logger = new Logger(ConnectService.name);

  constructor(
    @Inject(UPSTREAM_SETTINGS) private readonly settings: UpstreamSettings | null,
    private readonly authorizations: AuthorizationStateRepository,
    private readonly oauth: OAuthClient,
    private readonly tokens: TokenRefresher,
    private readonly connections: ConnectionRepository,
    private readonly views: ConnectionsService,
    private readonly subscriptions: SubscriptionService,
    private readonly subscriptionRows: SubscriptionRepository,
    private readonly events: EventEmitter2,
    private readonly audit: AuditLog,
  ) {}

  /** A new authorization request: the URL to send the user to, and its state. */
  async start(redirectUri?: string, startedBy?: AuditActor): Promise<{ url: string; state: string }> {
    const settings = this.upstream();
    const state = randomBytes(32).toString('base64url');
    const verifier = this.oauth.generateVerifier();
    const redirect = redirectUri ?? settings.redirectUri;
    await this.authorizations.prune();
    const principal = startedBy === undefined ? null : { id: startedBy.id, name: startedBy.name };
    await this.authorizations.create(hashState(state), verifier, redirect, AUTHORIZATION_TTL_SECONDS, principal);
    const codeChallenge = this.oauth.challengeOf(verifier);
    return { url: this.oauth.authorizationUrl(settings, { redirectUri: redirect, state, codeChallenge }), state };
  }

  /** The redirect back from the authorization server; `callbackActor` is the browser's side (its address). */
  async complete(callback: AuthorizationCallback, callbackActor: AuditActor): Promise<ConnectResult> {
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
    // The connection is the act of whoever started the request; the callback itself carries no token.
    const actor =
      pending.startedBy === null ? callbackActor : { ...pending.startedBy, remoteAddress: callbackActor.remoteAddress };
    return this.connect(settings, callback.code, pending, actor);
  }

  /** `menu-sync auth exchange <code>`: answers the newest pending out-of-band request. */
  async completeOutOfBand(code: string, actor: AuditActor): Promise<ConnectionView> {
    const settings = this.upstream();
    const pending = await this.authorizations.consumeNewest(OUT_OF_BAND_REDIRECT_URI);
    if (pending === null) throw new NoPendingAuthorizationError();
    return (await this.connect(settings, code, pending, actor)).connection;
  }

  private async connect(
    settings: UpstreamSettings,
    code: string,
    pending: PendingAuthorization,
    actor: AuditActor,
  ): Promise<ConnectResult> {
    const exchanged = await this.exchange(settings, code, pending);
    const tokens = {
      ...exchanged,
      ownerId: exchanged.ownerId ?? (await this.oauth.resourceOwner(settings.authUrl, exchanged.accessToken)),
    };
    const result = await this.connections.whileConnecting(async (): Promise<Omit<ConnectResult, 'at'>> => {
      const earlier =
        tokens.ownerId === undefined
          ? []
          : await this.connections.ofOwner(settings.authUrl, settings.baseUrl, tokens.ownerId);
      return earlier.length === 0
        ? this.create(settings, tokens, actor)
        : this.replace(settings, tokens, earlier, actor);
    });
    const at = new Date().toISOString();
    this.events.emit(CONNECTION_CREATED, { connectionId: result.connection.id });
    return { ...result, at };
  }

  private async create(
    settings: UpstreamSettings,
    tokens: TokenSet,
    actor: AuditActor,
  ): Promise<Omit<ConnectResult, 'at'>> {
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
    return { outcome: 'created', connection: await this.views.view(connection), retired: [] };
  }

  /**
   * The owner is connected already: the connection that has a registered subscription (the oldest
   * such, else the oldest) takes the new tokens and keeps its subscription, so the upstream keeps
   * one endpoint for the owner; it is subscribed again only when it has none registered (with the
   * upstream of today: a sandbox's emulator is new each start). Any other connection of the owner
   * (made before an owner was connected once, or while its owner was unknown) is retired.
   */
  private async replace(
    settings: UpstreamSettings,
    tokens: TokenSet,
    earlier: Connection[],
    actor: AuditActor,
  ): Promise<Omit<ConnectResult, 'at'>> {
    // The sandbox's emulator starts with this process and knows no endpoint registered before it.
    const since = settings.mode === 'emulator' ? PROCESS_STARTED_AT : 0;
    const registered = new Set(
      (await this.subscriptionRows.list(earlier.map((connection) => connection.id)))
        .filter((subscription) => subscription.status === 'registered' && subscription.createdAt.getTime() >= since)
        .map((subscription) => subscription.connectionId),
    );
    const kept = earlier.find((connection) => registered.has(connection.id)) ?? earlier[0];
    const connection = await this.connections.withLocked(kept.id, (_current, manager) =>
      this.connections.replaceTokens(manager, kept.id, tokens, settings.scopes),
    );
    this.tokens.forget(kept.id);
    this.logger.log({
      msg: `connection ${kept.id} of owner ${tokens.ownerId} authorized again: its tokens replaced, its subscription kept`,
      connectionId: kept.id,
      previousState: kept.state,
      scopes: connection.scopes,
    });
    await this.audit.record({
      actor,
      action: 'connection.replaced',
      target: String(kept.id),
      detail: { previous_state: kept.state },
    });
    if (!registered.has(kept.id)) await this.subscriptions.subscribe(kept.id);
    const retired: ConnectResult['retired'] = [];
    for (const other of earlier.filter((item) => item.id !== kept.id))
      retired.push(await this.retire(other.id, kept.id, actor));
    return { outcome: 'replaced', connection: await this.views.view(connection), retired };
  }

  /** Retires a further connection of an owner whose connection `keptId` took the new tokens. */
  private async retire(id: number, keptId: number, actor: AuditActor): Promise<ConnectResult['retired'][number]> {
    const { upstreamIds } = await this.subscriptions.retire(id);
    this.tokens.forget(id);
    const endpoints =
      upstreamIds.length === 0
        ? ''
        : `; remove its webhook endpoint(s) ${upstreamIds.join(', ')} upstream (their deliveries now answer 404)`;
    this.logger.warn({
      msg: `connection ${id} retired: connection ${keptId} has its owner's tokens${endpoints}`,
      connectionId: id,
      replacedBy: keptId,
    });
    await this.audit.record({
      actor,
      action: 'connection.retired',
      target: String(id),
      detail: { replaced_by: keptId, upstream_endpoints: upstreamIds },
    });
    return { id, upstream_endpoints: upstreamIds };
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

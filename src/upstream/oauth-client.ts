import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { createHash } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import type { TokenSet } from '../connections/connection.js';
import { canonicalId, parseExact } from '../domain/canonical-id.js';
import { MetricsService } from '../observability/metrics.service.js';
import { callWithRetries } from './call-with-retries.js';
import { OAuthGrantError, UpstreamUnavailableError } from './upstream.errors.js';
import type { UpstreamSettings } from './upstream-settings.js';
import { UPSTREAM_TIMINGS } from './upstream-timings.js';
import type { UpstreamTimings } from './upstream-timings.js';
import { REDACTED } from '../observability/redacted.js';

/** The application as the token endpoint knows it; the refresher passes the connection's own auth URL. */
export type OAuthApplication = Pick<UpstreamSettings, 'authUrl' | 'clientId' | 'clientSecret'>;

export interface AuthorizationRequest {
  redirectUri: string;
  state?: string;
  /** The S256 challenge of the PKCE verifier (see `challengeOf`). */
  codeChallenge?: string;
}

const NULL_BODY_STATUSES = new Set([204, 205, 304]);

/**
 * The OAuth 2.0 protocol steps against `{auth_url}` (spec endpoints 1 and 2, RFC 6749 §6):
 * requests built and answers checked by oauth4webapi, client authentication by `client_id` and
 * `client_secret` form fields (docs/reference.md §6). A grant is never retried after a fault that may have
 * reached the server: a repeated code or rotated refresh token would revoke the whole grant.
 */
@Injectable()
export class OAuthClient {
  private readonly logger = new Logger(OAuthClient.name);

  constructor(
    @Inject(UPSTREAM_TIMINGS) private readonly timings: UpstreamTimings,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  /** Spec endpoint 1, scopes joined by a literal `+` as the spec shows (docs/reference.md §6), with PKCE S256. */
  authorizationUrl(
    settings: OAuthApplication & Pick<UpstreamSettings, 'scopes'>,
    request: AuthorizationRequest,
  ): string {
    const pair = (name: string, value: string) => `${name}=${encodeURIComponent(value)}`;
    const query = [
      pair('client_id', settings.clientId),
      pair('redirect_uri', request.redirectUri),
      'response_type=code',
      `scope=${settings.scopes.map(encodeURIComponent).join('+')}`,
    ];
    if (request.state !== undefined) query.push(pair('state', request.state));
    if (request.codeChallenge !== undefined)
      query.push(pair('code_challenge', request.codeChallenge), 'code_challenge_method=S256');
    return `${settings.authUrl}/oauth/authorize?${query.join('&')}`;
  }

  /** A fresh RFC 7636 code verifier (32 random bytes, base64url). */
  generateVerifier(): string {
    return oauth.generateRandomCodeVerifier();
  }

  /** The S256 challenge of a verifier. */
  challengeOf(verifier: string): string {
    return createHash('sha256').update(verifier, 'ascii').digest('base64url');
  }

  /** Spec endpoint 2: the authorization code for tokens. `codeVerifier` undefined when the request had no PKCE. */
  async exchangeCode(
    settings: OAuthApplication,
    code: string,
    redirectUri: string,
    codeVerifier: string | undefined,
  ): Promise<TokenSet> {
    const { as, client, auth } = endpoint(settings);
    const callback = oauth.validateAuthResponse(as, client, new URLSearchParams({ code }), oauth.skipStateCheck);
    const response = await this.post('authorization_code', (options) =>
      oauth.authorizationCodeGrantRequest(
        as,
        client,
        auth,
        callback,
        redirectUri,
        codeVerifier ?? oauth.nopkce,
        options,
      ),
    );
    return this.tokenSet(
      () => oauth.processAuthorizationCodeResponse(as, client, response),
      [settings.clientSecret, code, codeVerifier],
    );
  }

  /** RFC 6749 §6. The answer's refresh token is null when the server keeps the old one. */
  async refresh(settings: OAuthApplication, refreshToken: string): Promise<TokenSet> {
    const { as, client, auth } = endpoint(settings);
    const response = await this.post('refresh_token', (options) =>
      oauth.refreshTokenGrantRequest(as, client, auth, refreshToken, options),
    );
    return this.tokenSet(
      () => oauth.processRefreshTokenResponse(as, client, response),
      [settings.clientSecret, refreshToken],
    );
  }

  /**
   * The user an access token belongs to, from Doorkeeper's token introspection
   * (`GET {auth_url}/oauth/token/info`, `resource_owner_id`; the platform is built on Doorkeeper,
   * the spec's token answer names no user). Undefined when the server has no such endpoint, refuses,
   * or answers something else: the owner is then learned from the connection's first webhook.
   */
  async resourceOwner(authUrl: string, accessToken: string): Promise<string | undefined> {
    try {
      const response = await callWithRetries(
        this.timings,
        {
          label: 'token info',
          repeatable: true,
          observe: (status) => this.metrics?.upstreamRequests.inc({ status: String(status) }),
          send: async (signal) =>
            buffered(
              await fetch(`${authUrl}/oauth/token/info`, {
                headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' },
                signal,
                redirect: 'manual',
              }),
            ),
        },
        this.logger,
      );
      if (response.status !== 200) {
        this.logger.log({ msg: `token info answered ${response.status}: the owner is learned from the first webhook` });
        return undefined;
      }
      // The id exactly as ingress reads ids (an integer beyond 2^53 keeps its digits).
      const info = parseExact(await response.text()) as { resource_owner_id?: unknown } | null;
      const owner = typeof info === 'object' && info !== null ? canonicalId(info.resource_owner_id) : undefined;
      return owner === undefined || owner === '' || owner.length > 255 ? undefined : owner;
    } catch (error) {
      this.logger.warn({
        msg: 'token info failed: the owner is learned from the first webhook',
        errorType: (error as object | null)?.constructor?.name,
      });
      return undefined;
    }
  }

  /** One grant request, retried only on 429/5XX answers and on connections that were never made. */
  private post(
    grantType: string,
    request: (options: oauth.TokenEndpointRequestOptions) => Promise<Response>,
  ): Promise<Response> {
    return callWithRetries(
      this.timings,
      {
        label: `token endpoint (${grantType})`,
        repeatable: false,
        // Token endpoint calls are upstream calls too (menu_sync_upstream_requests_total).
        observe: (status) => this.metrics?.upstreamRequests.inc({ status: String(status) }),
        // http:// is the emulator's (and a test server's) scheme; the configuration decides the URL.
        send: async (signal) => buffered(await request({ signal, [oauth.allowInsecureRequests]: true })),
      },
      this.logger,
    );
  }

  private async tokenSet(
    process: () => Promise<oauth.TokenEndpointResponse>,
    secrets: (string | undefined)[],
  ): Promise<TokenSet> {
    let answer: oauth.TokenEndpointResponse;
    try {
      answer = await process();
    } catch (error) {
      throw await translate(error, secrets);
    }
    return toTokenSet(answer, this.timings.now());
  }
}

function endpoint(settings: OAuthApplication) {
  const as: oauth.AuthorizationServer = { issuer: settings.authUrl, token_endpoint: `${settings.authUrl}/oauth/token` };
  return {
    as,
    client: { client_id: settings.clientId } as oauth.Client,
    auth: oauth.ClientSecretPost(settings.clientSecret),
  };
}

/** The answer with its body read, so the timeout covers the whole exchange. */
async function buffered(response: Response): Promise<Response> {
  const body = NULL_BODY_STATUSES.has(response.status) ? null : await response.arrayBuffer();
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/**
 * Spec endpoint 2's answer: `created_at` (seconds) when given, else the time it arrived. The spec
 * shows no user id; `resource_owner_id` (or `user_id`), when an upstream sends one, names the owner.
 */
function toTokenSet(answer: oauth.TokenEndpointResponse, nowMs: number): TokenSet {
  const expiresIn = answer.expires_in;
  if (expiresIn === undefined || !Number.isFinite(expiresIn) || expiresIn < 1) {
    throw new UpstreamUnavailableError('the token endpoint answered without a positive expires_in');
  }
  const createdAt =
    typeof answer.created_at === 'number' && Number.isFinite(answer.created_at) ? answer.created_at * 1000 : nowMs;
  const scopes = typeof answer.scope === 'string' ? answer.scope.split(/[ +]+/).filter((scope) => scope !== '') : [];
  const owner = answer.resource_owner_id ?? answer.user_id;
  return {
    ownerId: typeof owner === 'string' || typeof owner === 'number' ? String(owner) : undefined,
    accessToken: answer.access_token,
    refreshToken: answer.refresh_token ?? null,
    createdAt: new Date(createdAt),
    expiresIn: Math.floor(expiresIn),
    scopes: scopes.length > 0 ? scopes : undefined,
  };
}

/** oauth4webapi's errors as ours; their causes (which hold the answer's body) are left behind. */
async function translate(error: unknown, secrets: (string | undefined)[]): Promise<unknown> {
  if (error instanceof oauth.ResponseBodyError) {
    return new OAuthGrantError(error.error, error.status, redact(error.error_description, secrets));
  }
  if (error instanceof oauth.WWWAuthenticateChallengeError) {
    const body = (await error.response.json().catch(() => undefined)) as
      { error?: unknown; error_description?: unknown } | undefined;
    const code = typeof body?.error === 'string' ? body.error : (error.cause[0]?.parameters.error ?? 'invalid_client');
    const description = typeof body?.error_description === 'string' ? body.error_description : undefined;
    return new OAuthGrantError(code, error.status, redact(description, secrets));
  }
  if (error instanceof oauth.OperationProcessingError || error instanceof oauth.UnsupportedOperationError) {
    const status = (error.cause as { status?: unknown } | undefined)?.status;
    return new UpstreamUnavailableError(
      `the token endpoint's answer is not a token answer${typeof status === 'number' ? ` (HTTP ${status})` : ''}: ${error.message}`,
    );
  }
  return error;
}

/** A server's error description, shortened, with any value we sent blanked out. */
function redact(text: string | undefined, secrets: (string | undefined)[]): string | undefined {
  if (text === undefined || text === '') return undefined;
  let clean = text;
  for (const secret of secrets) {
    if (secret) clean = clean.split(secret).join(REDACTED);
  }
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is replaced
  return clean.replace(/[\u0000-\u001f\u007f]+/g, ' ').slice(0, 300);
}

import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { Clock } from '../clock.js';
import { EMULATOR_OPTIONS } from '../emulator-options.js';
import type { EmulatorOptions } from '../emulator-options.js';
import { apiError, EmulatorHttpError, oauthError } from '../emulator-http.error.js';
import { FaultSettings } from '../fault-settings.js';
import type { Principal } from '../platform-event.js';

/** The user who "logs in" at the authorization endpoint: the emulator approves every request as them. */
export const DEMO_USER_ID = '4001';

export const OOB_REDIRECT_URI = 'urn:ietf:wg:oauth:2.0:oob';
export const KNOWN_SCOPES = ['read_orders', 'read_menu', 'write_menu', 'write_orders', 'read_stores', 'write_stores'];
const CODE_LIFETIME_MS = 10 * 60_000;
/** Beyond this many codes, access tokens or logged token requests, the stale ones are dropped. */
const MAX_KEPT = 10_000;
const PRUNE_CHUNK = 1_000;
const PKCE_VALUE = /^[A-Za-z0-9\-._~]{43,128}$/;

/** One request to the token endpoint, without any secret or token value. */
export interface TokenRequestRecord {
  grant_type: string | null;
  status: number;
  error: string | null;
  at: string;
}

/** The answer of the authorization endpoint: a redirect, or the out-of-band page showing the code. */
export type AuthorizeOutcome = { redirect: string } | { code: string };

/** RFC 6749 §5.1 success answer. */
export interface TokenAnswer {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token?: string;
  created_at: number;
  /** Doorkeeper's addition: the granted scopes, space-separated. */
  scope: string;
}

/** Doorkeeper's `GET /oauth/token/info` answer (`Doorkeeper::AccessToken#as_json`). */
export interface TokenInfo {
  /** The user's id; a number when it is one, as Doorkeeper renders an integer primary key. */
  resource_owner_id: number | string;
  scope: string[];
  /** Seconds left until the token expires. */
  expires_in: number;
  application: { uid: string };
  /** Unix time in seconds. */
  created_at: number;
}

/** What one user consented to one client: every code, access and refresh token descends from one grant. */
interface Grant {
  clientId: string;
  userId: string;
  revoked: boolean;
}

interface AuthorizationCode {
  clientId: string;
  redirectUri: string;
  scopes: string[];
  userId: string;
  challenge: string | undefined;
  expiresAtMs: number;
  used: boolean;
  /** Set once exchanged, so a second exchange can revoke what the first one issued. */
  grantId?: string;
}

interface AccessToken {
  grantId: string;
  scopes: string[];
  issuedAtMs: number;
  expiresAtMs: number;
}

interface RefreshToken {
  grantId: string;
  scopes: string[];
  rotated: boolean;
}

type Form = Record<string, unknown>;

/**
 * The platform's OAuth 2.0 authorization server, in memory: authorization codes with PKCE,
 * rotating refresh tokens with reuse detection (OAuth 2.0 Security BCP §4.14), and the bearer
 * check the API routes call.
 */
@Injectable()
export class OAuthServer {
  private readonly grants = new Map<string, Grant>();
  private readonly codes = new Map<string, AuthorizationCode>();
  private readonly accessTokens = new Map<string, AccessToken>();
  private readonly refreshTokens = new Map<string, RefreshToken>();
  private readonly requests: TokenRequestRecord[] = [];

  constructor(
    @Inject(EMULATOR_OPTIONS) private readonly options: EmulatorOptions,
    private readonly clock: Clock,
    private readonly faults: FaultSettings,
  ) {}

  /** `GET /oauth/authorize`: approves as the demo user. Errors that cannot be redirected throw (RFC 6749 §4.1.2.1). */
  authorize(query: Form): AuthorizeOutcome {
    const clientId = single(query, 'client_id');
    if (clientId !== this.options.clientId) throw oauthError(400, 'invalid_client', 'unknown client_id');
    const redirectUri = single(query, 'redirect_uri');
    if (redirectUri === undefined || !isRedirectUri(redirectUri)) {
      throw oauthError(400, 'invalid_request', 'redirect_uri is missing or not an absolute URI without a fragment');
    }
    const state = single(query, 'state');
    const request = parseAuthorizationRequest(query);
    if ('error' in request) {
      if (redirectUri === OOB_REDIRECT_URI) throw oauthError(400, request.error, request.description);
      return {
        redirect: withParams(redirectUri, { error: request.error, error_description: request.description, state }),
      };
    }
    const code = randomToken();
    this.prune();
    this.codes.set(code, {
      clientId,
      redirectUri,
      ...request,
      userId: DEMO_USER_ID,
      expiresAtMs: this.nowMs() + CODE_LIFETIME_MS,
      used: false,
    });
    return redirectUri === OOB_REDIRECT_URI ? { code } : { redirect: withParams(redirectUri, { code, state }) };
  }

  /** `POST /oauth/token`, recorded in the token request log whatever the outcome. */
  token(form: unknown, authorization: string | undefined): TokenAnswer {
    const body: Form = typeof form === 'object' && form !== null ? (form as Form) : {};
    const grantType = typeof body.grant_type === 'string' ? body.grant_type : null;
    try {
      const answer = this.grantToken(body, authorization);
      this.record(grantType, 200, null);
      return answer;
    } catch (error) {
      if (error instanceof EmulatorHttpError) this.record(grantType, error.status, oauthErrorCode(error));
      else this.record(grantType, 500, 'server_error');
      throw error;
    }
  }

  /** The principal of a `Bearer` token that is live and (when `scope` is given) grants that scope. */
  authenticate(authorization: string | undefined, scope?: string): Principal {
    const match = /^Bearer[ ]+(\S*)\s*$/i.exec(authorization ?? '');
    if (!match)
      throw apiError(401, 'Unauthorized', 'an access token is required', undefined, { 'WWW-Authenticate': 'Bearer' });
    const token = this.accessTokens.get(match[1]);
    const grant = token && this.grants.get(token.grantId);
    if (!token || !grant || grant.revoked || this.isExpired(token)) {
      throw apiError(401, 'Unauthorized', 'the access token is unknown, revoked or expired', undefined, {
        'WWW-Authenticate': 'Bearer error="invalid_token"',
      });
    }
    if (scope !== undefined && !token.scopes.includes(scope)) {
      throw apiError(403, 'Forbidden', `the access token does not grant the scope ${scope}`, undefined, {
        'WWW-Authenticate': `Bearer error="insufficient_scope" scope="${scope}"`,
      });
    }
    return { userId: grant.userId, clientId: grant.clientId, scopes: [...token.scopes] };
  }

  /**
   * `GET /oauth/token/info` as Doorkeeper answers it (TokenInfoController#show): the bearer token's
   * owner, scopes, seconds left, application and issue time; a token that is missing, unknown,
   * revoked or expired → 401 `invalid_token` (Doorkeeper's InvalidTokenResponse).
   */
  tokenInfo(authorization: string | undefined, accessTokenParam: unknown): TokenInfo {
    const injected = this.faults.current.token_info_status;
    if (injected !== 0)
      throw oauthError(
        injected,
        injected === 404 ? 'not_found' : 'server_error',
        `token info answers ${injected} (an injected fault)`,
      );
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization ?? '');
    const presented = match?.[1] ?? (typeof accessTokenParam === 'string' ? accessTokenParam : undefined);
    const token = presented === undefined ? undefined : this.accessTokens.get(presented);
    const grant = token && this.grants.get(token.grantId);
    if (!token || !grant || grant.revoked || this.isExpired(token)) {
      throw oauthError(401, 'invalid_token', 'The access token is invalid', {
        'WWW-Authenticate':
          'Bearer realm="Doorkeeper", error="invalid_token", error_description="The access token is invalid"',
      });
    }
    return {
      resource_owner_id: /^[1-9]\d{0,14}$/.test(grant.userId) ? Number(grant.userId) : grant.userId,
      scope: [...token.scopes],
      expires_in: Math.max(0, Math.round((token.expiresAtMs - this.nowMs()) / 1000)),
      application: { uid: grant.clientId },
      created_at: Math.floor(token.issuedAtMs / 1000),
    };
  }

  /** Expires every live access token now; returns how many there were. */
  expireAccessTokens(): number {
    const now = this.nowMs();
    let expired = 0;
    for (const token of this.accessTokens.values()) {
      if (this.grants.get(token.grantId)?.revoked || this.isExpired(token)) continue;
      token.expiresAtMs = now;
      expired += 1;
    }
    return expired;
  }

  tokenRequests(): TokenRequestRecord[] {
    return this.requests.map((record) => ({ ...record }));
  }

  private grantToken(body: Form, authorization: string | undefined): TokenAnswer {
    if (this.faults.takeTokenEndpointFailure()) {
      throw oauthError(503, 'temporarily_unavailable', 'the token endpoint is temporarily unavailable', {
        'Retry-After': '1',
      });
    }
    const clientId = this.authenticateClient(body, authorization);
    const grantType = single(body, 'grant_type');
    if (grantType === undefined) throw oauthError(400, 'invalid_request', 'grant_type is required');
    if (grantType === 'authorization_code') return this.exchangeCode(body, clientId);
    if (grantType === 'refresh_token') return this.refresh(body, clientId);
    throw oauthError(400, 'unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
  }

  /** RFC 6749 §2.3.1: `client_id` and `client_secret` in the form, or HTTP Basic — not both. */
  private authenticateClient(body: Form, authorization: string | undefined): string {
    const basic = /^Basic[ ]+(\S+)\s*$/i.exec(authorization ?? '');
    const challenge: Record<string, string> = basic ? { 'WWW-Authenticate': 'Basic realm="oauth"' } : {};
    let credentials: [string | undefined, string | undefined] = [
      single(body, 'client_id'),
      single(body, 'client_secret'),
    ];
    if (basic) {
      if (credentials[1] !== undefined)
        throw oauthError(400, 'invalid_request', 'use one client authentication method, not two');
      const decoded = decodeBasic(basic[1]);
      if (decoded === undefined || (credentials[0] !== undefined && credentials[0] !== decoded[0])) {
        throw oauthError(401, 'invalid_client', 'malformed client credentials', challenge);
      }
      credentials = decoded;
    }
    const [clientId, secret] = credentials;
    if (clientId !== this.options.clientId || secret === undefined || !sameText(secret, this.options.clientSecret)) {
      throw oauthError(401, 'invalid_client', 'client authentication failed', challenge);
    }
    return clientId;
  }

  private exchangeCode(body: Form, clientId: string): TokenAnswer {
    const value = required(body, 'code');
    const redirectUri = required(body, 'redirect_uri');
    const verifier = single(body, 'code_verifier');
    const code = this.codes.get(value);
    if (!code) throw invalidGrant('unknown authorization code');
    if (code.used) {
      if (code.grantId !== undefined) this.revoke(code.grantId);
      throw invalidGrant('the authorization code was already used; the tokens issued from it are revoked');
    }
    code.used = true;
    if (this.nowMs() >= code.expiresAtMs) throw invalidGrant('the authorization code expired');
    if (code.clientId !== clientId) throw invalidGrant('the authorization code was issued to another client');
    if (code.redirectUri !== redirectUri) throw invalidGrant('redirect_uri differs from the authorization request');
    if (!verifierMatches(code.challenge, verifier))
      throw invalidGrant('the PKCE code_verifier does not match the code_challenge');
    code.grantId = randomUUID();
    this.grants.set(code.grantId, { clientId, userId: code.userId, revoked: false });
    return this.issue(code.grantId, code.scopes, code.scopes, true);
  }

  private refresh(body: Form, clientId: string): TokenAnswer {
    const value = required(body, 'refresh_token');
    const token = this.refreshTokens.get(value);
    const grant = token && this.grants.get(token.grantId);
    if (!token || !grant || grant.revoked) throw invalidGrant('unknown or revoked refresh token');
    if (grant.clientId !== clientId) throw invalidGrant('the refresh token was issued to another client');
    if (token.rotated) {
      this.revoke(token.grantId);
      throw invalidGrant('the refresh token was already used; every token of its grant is revoked');
    }
    const requested = single(body, 'scope');
    const scopes = requested === undefined || requested.trim() === '' ? token.scopes : parseScopes(requested);
    if (scopes === undefined || scopes.some((scope) => !token.scopes.includes(scope))) {
      throw oauthError(400, 'invalid_scope', 'a refresh may narrow the granted scope, never widen it');
    }
    const rotate = !this.faults.current.keep_refresh_tokens;
    if (rotate) token.rotated = true;
    return this.issue(token.grantId, scopes, token.scopes, rotate);
  }

  /** A new access token, and a new refresh token (keeping the grant's full scope, RFC 6749 §6) when asked. */
  private issue(grantId: string, scopes: string[], refreshScopes: string[], withRefreshToken: boolean): TokenAnswer {
    this.prune();
    const now = this.nowMs();
    const accessToken = randomToken();
    const expiresIn = this.options.tokenLifetimeSeconds;
    this.accessTokens.set(accessToken, { grantId, scopes, issuedAtMs: now, expiresAtMs: now + expiresIn * 1000 });
    const answer: TokenAnswer = {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: expiresIn,
      created_at: Math.floor(now / 1000),
      scope: scopes.join(' '),
    };
    if (withRefreshToken) {
      answer.refresh_token = randomToken();
      this.refreshTokens.set(answer.refresh_token, { grantId, scopes: refreshScopes, rotated: false });
    }
    return answer;
  }

  private isExpired(token: AccessToken): boolean {
    const now = this.nowMs();
    const early = this.faults.current.token_expiry_seconds;
    return now >= token.expiresAtMs || (early > 0 && now >= token.issuedAtMs + early * 1000);
  }

  private revoke(grantId: string): void {
    const grant = this.grants.get(grantId);
    if (grant) grant.revoked = true;
  }

  private record(grantType: string | null, status: number, error: string | null): void {
    this.requests.push({ grant_type: grantType, status, error, at: this.clock.now().toISOString() });
    if (this.requests.length > MAX_KEPT + PRUNE_CHUNK) this.requests.splice(0, PRUNE_CHUNK);
  }

  /**
   * Bounds a long-running emulator's memory: expired codes and access tokens are forgotten once
   * there are many (either then answers as unknown, which is refused the same way). Refresh tokens
   * and grants stay: a rotated refresh token must still be recognised as reused.
   */
  private prune(): void {
    const now = this.nowMs();
    if (this.codes.size > MAX_KEPT)
      for (const [code, entry] of this.codes) if (now >= entry.expiresAtMs) this.codes.delete(code);
    if (this.accessTokens.size > MAX_KEPT)
      for (const [token, entry] of this.accessTokens) if (now >= entry.expiresAtMs) this.accessTokens.delete(token);
  }

  private nowMs(): number {
    return this.clock.now().getTime();
  }
}

/** A parameter given at most once (RFC 6749 §3.1: parameters MUST NOT be repeated). */
function single(params: Form, name: string): string | undefined {
  const value = params[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw oauthError(400, 'invalid_request', `${name} must be given once`);
  return value;
}

function required(params: Form, name: string): string {
  const value = single(params, name);
  if (value === undefined || value === '') throw oauthError(400, 'invalid_request', `${name} is required`);
  return value;
}

/** The response type, scope and PKCE challenge of an authorization request, or the error to redirect with. */
function parseAuthorizationRequest(
  query: Form,
): { scopes: string[]; challenge: string | undefined } | { error: string; description: string } {
  if (single(query, 'response_type') !== 'code')
    return { error: 'unsupported_response_type', description: 'response_type must be code' };
  const scopes = parseScopes(single(query, 'scope'));
  if (scopes === undefined)
    return { error: 'invalid_scope', description: `scope must name some of ${KNOWN_SCOPES.join(', ')}` };
  const challenge = single(query, 'code_challenge');
  const method = single(query, 'code_challenge_method');
  if (challenge === undefined && method === undefined) return { scopes, challenge };
  // A challenge without a method means `plain` (RFC 7636 §4.3), which the platform does not accept.
  if (method !== 'S256') return { error: 'invalid_request', description: 'code_challenge_method must be S256' };
  if (challenge === undefined || !PKCE_VALUE.test(challenge)) {
    return { error: 'invalid_request', description: 'code_challenge must be 43 to 128 characters of [A-Za-z0-9-._~]' };
  }
  return { scopes, challenge };
}

/** Scope names joined by spaces or by a literal `+`; undefined when empty or naming an unknown scope. */
function parseScopes(scope: string | undefined): string[] | undefined {
  const scopes = [...new Set((scope ?? '').split(/[ +]+/).filter((name) => name !== ''))];
  if (scopes.length === 0 || scopes.some((name) => !KNOWN_SCOPES.includes(name))) return undefined;
  return scopes;
}

function isRedirectUri(value: string): boolean {
  if (value === OOB_REDIRECT_URI) return true;
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  return url.hash === '' && !value.includes('#') && !['javascript:', 'data:', 'vbscript:'].includes(url.protocol);
}

/** The redirect URI with extra query parameters, keeping its own. */
function withParams(uri: string, params: Record<string, string | undefined>): string {
  const url = new URL(uri);
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined) url.searchParams.set(name, value);
  }
  return url.toString();
}

/** RFC 7636 §4.6; without a challenge a verifier is refused too, so PKCE cannot be stripped from a flow. */
function verifierMatches(challenge: string | undefined, verifier: string | undefined): boolean {
  if (challenge === undefined) return verifier === undefined;
  if (verifier === undefined || !PKCE_VALUE.test(verifier)) return false;
  return sameText(createHash('sha256').update(verifier, 'ascii').digest('base64url'), challenge);
}

/** RFC 6749 §2.3.1: the client id and secret are form-urlencoded before Basic encoding. */
function decodeBasic(encoded: string): [string, string] | undefined {
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  try {
    const unescape = (part: string) => decodeURIComponent(part.replace(/\+/g, ' '));
    return [unescape(decoded.slice(0, colon)), unescape(decoded.slice(colon + 1))];
  } catch {
    return undefined;
  }
}

function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

function invalidGrant(description: string): EmulatorHttpError {
  return oauthError(400, 'invalid_grant', description);
}

function oauthErrorCode(error: EmulatorHttpError): string | null {
  const body = error.body as { error?: unknown } | null;
  return typeof body?.error === 'string' ? body.error : null;
}

function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

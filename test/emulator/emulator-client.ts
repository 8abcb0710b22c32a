import { createHash, randomBytes } from 'node:crypto';
import { emulatorOptions, EMULATOR_OPTIONS } from '../../src/emulator/emulator-options.js';
import type { EmulatorOptions } from '../../src/emulator/emulator-options.js';
import { startEmulator } from '../../src/emulator/emulator.factory.js';
import type { RunningEmulator } from '../../src/emulator/emulator.factory.js';
import { KNOWN_SCOPES, OAuthServer } from '../../src/emulator/oauth/oauth-server.service.js';
import type { TokenAnswer } from '../../src/emulator/oauth/oauth-server.service.js';

/** An emulator in this process on a free port, without the demo data unless asked. */
export function bootEmulator(overrides: Partial<EmulatorOptions> = {}): Promise<RunningEmulator> {
  return startEmulator(emulatorOptions({ port: 0, demoData: false, ...overrides }));
}

/** An HTTP answer, read whole; redirects are not followed. */
export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: any;
}

export function call(emulator: RunningEmulator, path: string, init: RequestInit = {}): Promise<Reply> {
  return fetchReply(`${emulator.url}${path}`, init);
}

/** Any URL, redirects not followed. */
export async function fetchReply(url: string, init: RequestInit = {}): Promise<Reply> {
  const response = await fetch(url, { redirect: 'manual', ...init });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

/** A JSON request to the control API. */
export function control(emulator: RunningEmulator, method: string, path: string, body?: unknown): Promise<Reply> {
  return call(emulator, path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** `POST /oauth/token` with a form body. */
export function postToken(
  emulator: RunningEmulator,
  params: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<Reply> {
  return call(emulator, '/oauth/token', { method: 'POST', headers, body: new URLSearchParams(params) });
}

export function clientOf(emulator: RunningEmulator): { client_id: string; client_secret: string } {
  const options = emulator.app.get<EmulatorOptions>(EMULATOR_OPTIONS);
  return { client_id: options.clientId, client_secret: options.clientSecret };
}

/** An RFC 7636 verifier and its S256 challenge. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export interface CodeRequest {
  scope?: string;
  redirectUri?: string;
  challenge?: string;
  state?: string;
}

/** Follows the authorization request as the browser would and returns the code from the redirect. */
export async function authorizeCode(emulator: RunningEmulator, request: CodeRequest = {}): Promise<string> {
  const query = new URLSearchParams({
    client_id: clientOf(emulator).client_id,
    redirect_uri: request.redirectUri ?? 'http://127.0.0.1:9/callback',
    response_type: 'code',
    scope: request.scope ?? KNOWN_SCOPES.join(' '),
  });
  if (request.state !== undefined) query.set('state', request.state);
  if (request.challenge !== undefined) {
    query.set('code_challenge', request.challenge);
    query.set('code_challenge_method', 'S256');
  }
  const reply = await call(emulator, `/oauth/authorize?${query}`);
  const code = new URL(reply.headers.get('location') ?? 'about:blank').searchParams.get('code');
  if (reply.status !== 302 || code === null) throw new Error(`authorization failed: ${reply.status} ${reply.text}`);
  return code;
}

/** A fresh access and refresh token for the demo user (every scope unless narrowed), through the real endpoints. */
export async function obtainTokens(emulator: RunningEmulator, scope?: string): Promise<TokenAnswer> {
  const { verifier, challenge } = pkcePair();
  const redirectUri = 'http://127.0.0.1:9/callback';
  const code = await authorizeCode(emulator, { scope, redirectUri, challenge });
  const reply = await postToken(emulator, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: redirectUri,
    code_verifier: verifier,
    ...clientOf(emulator),
  });
  if (reply.status !== 200) throw new Error(`token exchange failed: ${reply.status} ${reply.text}`);
  return reply.json as TokenAnswer;
}

/** Every token answer the emulator gives from now on (its token endpoint calls this method of this instance). */
export function recordIssuedTokens(emulator: RunningEmulator): TokenAnswer[] {
  const issued: TokenAnswer[] = [];
  const oauth = emulator.app.get(OAuthServer);
  const token = oauth.token.bind(oauth);
  oauth.token = (form, authorization) => {
    const answer = token(form, authorization);
    issued.push(answer);
    return answer;
  };
  return issued;
}

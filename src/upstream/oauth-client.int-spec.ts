import { Logger } from '@nestjs/common';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunningEmulator } from '../emulator/emulator.factory.js';
import {
  authorizeCode,
  bootEmulator,
  call,
  clientOf,
  control,
  obtainTokens,
} from '../../test/emulator/emulator-client.js';
import { OAuthClient } from './oauth-client.js';
import type { OAuthApplication } from './oauth-client.js';
import { OAuthGrantError, UpstreamUnavailableError } from './upstream.errors.js';
import { DEFAULT_UPSTREAM_TIMINGS } from './upstream-timings.js';

const OOB = 'urn:ietf:wg:oauth:2.0:oob';
const LIFETIME_SECONDS = 3600;
const timings = { ...DEFAULT_UPSTREAM_TIMINGS, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 50, timeoutMs: 2_000 };

describe('OAuthClient against the emulator (oauth4webapi over http://)', () => {
  let emulator: RunningEmulator;
  let application: OAuthApplication;
  const client = new OAuthClient(timings);

  beforeAll(async () => {
    Logger.overrideLogger(false);
    emulator = await bootEmulator({ tokenLifetimeSeconds: LIFETIME_SECONDS });
    application = {
      authUrl: emulator.url,
      clientId: clientOf(emulator).client_id,
      clientSecret: clientOf(emulator).client_secret,
    };
  });

  afterAll(async () => {
    await emulator.close();
  });

  beforeEach(async () => {
    await control(emulator, 'POST', '/_emulator/faults', {});
  });

  const tokenRequests = async () =>
    (await call(emulator, '/_emulator/token_requests')).json.data as {
      grant_type: string;
      status: number;
      error: string | null;
    }[];

  it('follows its own authorization URL and exchanges the code with PKCE; created_at gives createdAt', async () => {
    const verifier = client.generateVerifier();
    const url = new URL(
      client.authorizationUrl(
        { ...application, scopes: ['read_menu', 'read_orders'] },
        { redirectUri: 'http://127.0.0.1:9/callback', state: 'the-state', codeChallenge: client.challengeOf(verifier) },
      ),
    );
    const redirect = await call(emulator, `${url.pathname}${url.search}`);
    const location = new URL(redirect.headers.get('location')!);
    expect(location.searchParams.get('state')).toBe('the-state');

    const before = Date.now();
    const tokens = await client.exchangeCode(
      application,
      location.searchParams.get('code')!,
      'http://127.0.0.1:9/callback',
      verifier,
    );

    expect(tokens).toEqual({
      accessToken: expect.any(String),
      refreshToken: expect.any(String),
      createdAt: expect.any(Date),
      expiresIn: LIFETIME_SECONDS,
      scopes: ['read_menu', 'read_orders'],
      ownerId: undefined,
    });
    // The token answer names no user (as Doorkeeper's): the owner comes from /oauth/token/info.
    expect(await client.resourceOwner(application.authUrl, tokens.accessToken)).toBe('4001');
    expect(await client.resourceOwner(application.authUrl, 'not-a-token')).toBeUndefined();
    expect(tokens.createdAt.getTime() % 1000).toBe(0);
    expect(Math.abs(tokens.createdAt.getTime() - before)).toBeLessThan(2_000);
    expect(
      (await call(emulator, '/stores/1/orders', { headers: { authorization: `Bearer ${tokens.accessToken}` } })).status,
    ).toBe(200);
  });

  it('exchanges an out-of-band code without PKCE', async () => {
    const reply = await call(
      emulator,
      `/oauth/authorize?client_id=${application.clientId}&redirect_uri=${encodeURIComponent(OOB)}&response_type=code&scope=read_menu`,
    );
    const code = /<code id="code">([^<]+)<\/code>/.exec(reply.text)![1];

    const tokens = await client.exchangeCode(application, code, OOB, undefined);

    expect(tokens.refreshToken).toEqual(expect.any(String));
    expect(tokens.scopes).toEqual(['read_menu']);
  });

  it('refuses a reused code with invalid_grant, naming neither the code nor the secret', async () => {
    const code = await authorizeCode(emulator);
    const redirectUri = 'http://127.0.0.1:9/callback';
    await client.exchangeCode(application, code, redirectUri, undefined);

    const error = await client
      .exchangeCode(application, code, redirectUri, undefined)
      .catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(OAuthGrantError);
    expect(error).toMatchObject({ error: 'invalid_grant', upstreamStatus: 400 });
    expect(String((error as Error).message)).not.toContain(code);
    expect(JSON.stringify(error)).not.toContain(application.clientSecret);
  });

  it('refreshes with client_id and client_secret form fields; a rotated refresh token comes back, a kept one does not', async () => {
    const first = await obtainTokens(emulator);
    const rotated = await client.refresh(application, first.refresh_token!);
    expect(rotated.refreshToken).toEqual(expect.any(String));
    expect(rotated.refreshToken).not.toBe(first.refresh_token);

    await control(emulator, 'POST', '/_emulator/faults', { keep_refresh_tokens: true });
    const kept = await client.refresh(application, rotated.refreshToken!);
    expect(kept.refreshToken).toBeNull();
    expect(kept.accessToken).not.toBe(rotated.accessToken);
  });

  it('maps a wrong client secret to invalid_client', async () => {
    const tokens = await obtainTokens(emulator);
    const error = await client
      .refresh({ ...application, clientSecret: 'wrong' }, tokens.refresh_token!)
      .catch((caught: unknown) => caught);
    expect(error).toMatchObject({ error: 'invalid_client', upstreamStatus: 401 });
  });

  it('retries a 503 token endpoint, then gives up with UpstreamUnavailableError', async () => {
    const tokens = await obtainTokens(emulator);
    await control(emulator, 'POST', '/_emulator/faults', { token_endpoint_failures: 3 });
    const seen = (await tokenRequests()).length;

    const refreshed = await client.refresh(application, tokens.refresh_token!);
    expect(refreshed.accessToken).toEqual(expect.any(String));
    expect((await tokenRequests()).slice(seen).map((r) => r.status)).toEqual([503, 503, 503, 200]);

    await control(emulator, 'POST', '/_emulator/faults', { token_endpoint_failures: 4 });
    await expect(client.refresh(application, refreshed.refreshToken!)).rejects.toBeInstanceOf(UpstreamUnavailableError);
    expect((await tokenRequests()).slice(seen + 4).map((r) => r.status)).toEqual([503, 503, 503, 503]);
  });

  it('does not repeat a grant whose answer timed out (it may have been used), but retries a refused connection', async () => {
    const hanging: Server = createServer(() => undefined);
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
    let hits = 0;
    hanging.on('request', () => (hits += 1));
    const port = (hanging.address() as AddressInfo).port;
    const quick = new OAuthClient({ ...timings, timeoutMs: 100 });
    try {
      const timedOut = await quick
        .refresh({ ...application, authUrl: `http://127.0.0.1:${port}` }, 'r')
        .catch((caught: unknown) => caught);
      expect(timedOut).toBeInstanceOf(UpstreamUnavailableError);
      expect(hits).toBe(1);
    } finally {
      hanging.closeAllConnections();
      await new Promise((resolve) => hanging.close(resolve));
    }
    const refused = await quick
      .refresh({ ...application, authUrl: `http://127.0.0.1:${port}` }, 'r')
      .catch((caught: unknown) => caught);
    expect(refused).toBeInstanceOf(UpstreamUnavailableError);
    expect((refused as Error).message).toMatch(/ECONNREFUSED.*attempt 4 of 4/);
  });

  it('treats an answer that is not a token answer as unavailable', async () => {
    const server = createServer((_request, response) =>
      response.writeHead(200, { 'content-type': 'text/html' }).end('<html>maintenance</html>'),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      await expect(client.refresh({ ...application, authUrl: `http://127.0.0.1:${port}` }, 'r')).rejects.toBeInstanceOf(
        UpstreamUnavailableError,
      );
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('sends exactly the RFC 6749 §6 form', async () => {
    const forms: string[] = [];
    const server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        forms.push(`${request.method} ${request.url} ${request.headers['content-type']} ${body}`);
        response
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ access_token: 'a', token_type: 'bearer', expires_in: 60, created_at: 1_700_000_000 }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const tokens = await client.refresh(
        { authUrl: `http://127.0.0.1:${port}`, clientId: 'id', clientSecret: 's&cret' },
        'r+1',
      );
      expect(tokens).toEqual({
        accessToken: 'a',
        refreshToken: null,
        createdAt: new Date(1_700_000_000_000),
        expiresIn: 60,
        scopes: undefined,
      });
      expect(forms).toEqual([
        'POST /oauth/token application/x-www-form-urlencoded;charset=UTF-8 refresh_token=r%2B1&grant_type=refresh_token&client_id=id&client_secret=s%26cret',
      ]);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

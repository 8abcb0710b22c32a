import { Clock } from '../../src/emulator/clock.js';
import type { RunningEmulator } from '../../src/emulator/emulator.factory.js';
import { EmulatorHttpError } from '../../src/emulator/emulator-http.error.js';
import { FaultSettings } from '../../src/emulator/fault-settings.js';
import type { Faults } from '../../src/emulator/fault-settings.js';
import { DEMO_USER_ID, OAuthServer } from '../../src/emulator/oauth/oauth-server.service.js';
import type { TokenAnswer } from '../../src/emulator/oauth/oauth-server.service.js';
import {
  authorizeCode,
  bootEmulator,
  call,
  clientOf,
  control,
  obtainTokens,
  pkcePair,
  postToken,
} from './emulator-client.js';
import type { Reply } from './emulator-client.js';

const LIFETIME_SECONDS = 3600;
const REDIRECT_URI = 'http://127.0.0.1:9/callback';
const OOB = 'urn:ietf:wg:oauth:2.0:oob';

let emulator: RunningEmulator;

beforeAll(async () => {
  emulator = await bootEmulator({ tokenLifetimeSeconds: LIFETIME_SECONDS });
});

afterAll(async () => {
  await emulator.close();
});

afterEach(async () => {
  await setFaults({});
});

/** The control endpoint when it exists, else the settings directly (the endpoint belongs to the delivery side). */
async function setFaults(faults: Partial<Faults>): Promise<void> {
  const reply = await control(emulator, 'POST', '/_emulator/faults', faults);
  if (reply.status === 404) emulator.app.get(FaultSettings).replace(faults);
  else expect(reply.status).toBe(200);
}

function authorizeQuery(params: Record<string, string>): Promise<Reply> {
  const query = new URLSearchParams({
    client_id: clientOf(emulator).client_id,
    redirect_uri: REDIRECT_URI,
    response_type: 'code',
    scope: 'read_orders',
    ...params,
  });
  return call(emulator, `/oauth/authorize?${query}`);
}

function redirectParams(location: string | null): URLSearchParams {
  expect(location).not.toBeNull();
  return new URL(location!).searchParams;
}

function exchange(code: string, extra: Record<string, string> = {}) {
  return postToken(emulator, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT_URI,
    ...clientOf(emulator),
    ...extra,
  });
}

function refresh(refreshToken: string, extra: Record<string, string> = {}) {
  return postToken(emulator, {
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
    ...clientOf(emulator),
    ...extra,
  });
}

/** What `authenticate` throws for this header, or undefined when it accepts it. */
function refusal(authorization: string | undefined, scope?: string): EmulatorHttpError | undefined {
  try {
    emulator.app.get(OAuthServer).authenticate(authorization, scope);
    return undefined;
  } catch (error) {
    if (error instanceof EmulatorHttpError) return error;
    throw error;
  }
}

function expectLive(tokens: TokenAnswer): void {
  expect(refusal(`Bearer ${tokens.access_token}`)).toBeUndefined();
}

function expectRejected(tokens: TokenAnswer): void {
  const error = refusal(`Bearer ${tokens.access_token}`);
  expect(error?.status).toBe(401);
  expect(error?.headers['WWW-Authenticate']).toBe('Bearer error="invalid_token"');
}

describe('GET /oauth/authorize', () => {
  it('redirects to the redirect URI with a code and the state, keeping its own query', async () => {
    const query =
      `client_id=${clientOf(emulator).client_id}&redirect_uri=${encodeURIComponent(`${REDIRECT_URI}?app=7`)}` +
      '&response_type=code&scope=read_orders+read_menu%2Bwrite_menu&state=xyz%20123';
    const reply = await call(emulator, `/oauth/authorize?${query}`);

    expect(reply.status).toBe(302);
    const location = reply.headers.get('location')!;
    expect(location.startsWith(`${REDIRECT_URI}?`)).toBe(true);
    const params = redirectParams(location);
    expect(params.get('app')).toBe('7');
    expect(params.get('state')).toBe('xyz 123');
    expect(params.get('code')).toMatch(/^[A-Za-z0-9_-]{22,}$/);

    const tokens = await exchange(params.get('code')!, { redirect_uri: `${REDIRECT_URI}?app=7` });
    expect(tokens.json.scope).toBe('read_orders read_menu write_menu');
  });

  it('shows the code on a page for the out-of-band redirect URI, and the code exchanges', async () => {
    const reply = await authorizeQuery({ redirect_uri: OOB });

    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toMatch(/^text\/html/);
    const code = /<code id="code">([^<]+)<\/code>/.exec(reply.text)?.[1];
    expect(code).toMatch(/^[A-Za-z0-9_-]{22,}$/);
    expect((await exchange(code!, { redirect_uri: OOB })).status).toBe(200);
  });

  it.each([
    ['an unknown client', { client_id: 'someone-else' }, 'invalid_client'],
    ['no redirect URI', { redirect_uri: '' }, 'invalid_request'],
    ['a relative redirect URI', { redirect_uri: '/callback' }, 'invalid_request'],
    ['a redirect URI with a fragment', { redirect_uri: `${REDIRECT_URI}#top` }, 'invalid_request'],
  ])('answers 400 without redirecting for %s', async (_case, params, error) => {
    const reply = await authorizeQuery(params);

    expect(reply.status).toBe(400);
    expect(reply.headers.get('location')).toBeNull();
    expect(reply.json.error).toBe(error);
  });

  it.each([
    ['a response type other than code', { response_type: 'token' }, 'unsupported_response_type'],
    ['an unknown scope', { scope: 'read_orders admin' }, 'invalid_scope'],
    ['an empty scope', { scope: '' }, 'invalid_scope'],
    ['a challenge without a method (plain)', { code_challenge: pkcePair().challenge }, 'invalid_request'],
    [
      'the plain challenge method',
      { code_challenge: pkcePair().challenge, code_challenge_method: 'plain' },
      'invalid_request',
    ],
    ['a malformed challenge', { code_challenge: 'short', code_challenge_method: 'S256' }, 'invalid_request'],
  ])('redirects with an error and the state for %s', async (_case, params, error) => {
    const reply = await authorizeQuery({ state: 's-1', ...params });

    expect(reply.status).toBe(302);
    const query = redirectParams(reply.headers.get('location'));
    expect(query.get('error')).toBe(error);
    expect(query.get('state')).toBe('s-1');
    expect(query.get('code')).toBeNull();
  });
});

describe('POST /oauth/token: authorization_code', () => {
  it("answers the token shape of the spec plus Doorkeeper's scope (no user id), uncacheable, for a live token of the demo user", async () => {
    const code = await authorizeCode(emulator, { scope: 'read_orders read_stores' });
    const before = Math.floor(Date.now() / 1000);
    const reply = await exchange(code);

    expect(reply.status).toBe(200);
    expect(reply.headers.get('cache-control')).toBe('no-store');
    expect(reply.headers.get('pragma')).toBe('no-cache');
    expect(reply.json).toEqual({
      access_token: expect.stringMatching(/^[A-Za-z0-9_-]{43,}$/),
      token_type: 'Bearer',
      expires_in: LIFETIME_SECONDS,
      refresh_token: expect.stringMatching(/^[A-Za-z0-9_-]{43,}$/),
      created_at: expect.any(Number),
      scope: 'read_orders read_stores',
    });
    expect(Number.isInteger(reply.json.created_at)).toBe(true);
    expect(Math.abs(reply.json.created_at - before)).toBeLessThanOrEqual(2);
    expect(emulator.app.get(OAuthServer).authenticate(`Bearer ${reply.json.access_token}`, 'read_orders')).toEqual({
      userId: DEMO_USER_ID,
      clientId: clientOf(emulator).client_id,
      scopes: ['read_orders', 'read_stores'],
    });
  });

  it('refuses a code used twice and revokes the tokens issued from it', async () => {
    const code = await authorizeCode(emulator);
    const first = (await exchange(code)).json as TokenAnswer;
    expectLive(first);

    const second = await exchange(code);

    expect(second.status).toBe(400);
    expect(second.json).toEqual({ error: 'invalid_grant', error_description: expect.any(String) });
    expectRejected(first);
    expect((await refresh(first.refresh_token!)).json.error).toBe('invalid_grant');
  });

  it('refuses a redirect URI other than the authorized one, and the code is spent', async () => {
    const code = await authorizeCode(emulator);

    expect((await exchange(code, { redirect_uri: `${REDIRECT_URI}/other` })).json.error).toBe('invalid_grant');
    expect((await exchange(code)).json.error).toBe('invalid_grant');
  });

  it('refuses an unknown or expired code', async () => {
    expect((await exchange('no-such-code')).json.error).toBe('invalid_grant');
    const code = await authorizeCode(emulator);
    emulator.app.get(Clock).advance(10 * 60_000);

    expect((await exchange(code)).json.error).toBe('invalid_grant');
  });

  it('checks the PKCE verifier against the S256 challenge', async () => {
    const { verifier, challenge } = pkcePair();
    const wrong = await authorizeCode(emulator, { challenge });
    const missing = await authorizeCode(emulator, { challenge });
    const right = await authorizeCode(emulator, { challenge });
    const unasked = await authorizeCode(emulator);

    expect((await exchange(wrong, { code_verifier: pkcePair().verifier })).json.error).toBe('invalid_grant');
    expect((await exchange(missing)).json.error).toBe('invalid_grant');
    expect((await exchange(unasked, { code_verifier: verifier })).json.error).toBe('invalid_grant');
    expect((await exchange(right, { code_verifier: verifier })).status).toBe(200);
  });

  it('authenticates the client with HTTP Basic as well', async () => {
    const { client_id, client_secret } = clientOf(emulator);
    const basic = (secret: string) => `Basic ${Buffer.from(`${client_id}:${secret}`).toString('base64')}`;
    const params = { grant_type: 'authorization_code', redirect_uri: REDIRECT_URI };

    const ok = await postToken(
      emulator,
      { ...params, code: await authorizeCode(emulator) },
      { authorization: basic(client_secret) },
    );
    const refused = await postToken(
      emulator,
      { ...params, code: await authorizeCode(emulator) },
      { authorization: basic('wrong') },
    );

    expect(ok.status).toBe(200);
    expect(refused.status).toBe(401);
    expect(refused.json.error).toBe('invalid_client');
    expect(refused.headers.get('www-authenticate')).toMatch(/^Basic/);
  });

  it.each([
    ['a wrong secret', { client_secret: 'wrong' }],
    ['an unknown client', { client_id: 'someone-else' }],
  ])('answers 401 invalid_client for %s', async (_case, credentials) => {
    const reply = await exchange(await authorizeCode(emulator), credentials);

    expect(reply.status).toBe(401);
    expect(reply.json).toEqual({ error: 'invalid_client', error_description: expect.any(String) });
  });

  it.each([
    ['no grant type', { grant_type: '' }, 'invalid_request'],
    ['another grant type', { grant_type: 'password' }, 'unsupported_grant_type'],
    ['no code', { code: '' }, 'invalid_request'],
  ])('answers 400 for %s', async (_case, params, error) => {
    const body: Record<string, string> = {
      grant_type: 'authorization_code',
      code: 'c',
      redirect_uri: REDIRECT_URI,
      ...clientOf(emulator),
      ...params,
    };
    for (const [name, value] of Object.entries(body)) if (value === '') delete body[name];
    const reply = await postToken(emulator, body);

    expect(reply.status).toBe(400);
    expect(reply.json.error).toBe(error);
  });
});

describe('POST /oauth/token: refresh_token', () => {
  it('rotates: the new pair works, the used refresh token is refused, and its reuse revokes the newest pair', async () => {
    const first = await obtainTokens(emulator);
    const reply = await refresh(first.refresh_token!);
    const second = reply.json as TokenAnswer;

    expect(reply.status).toBe(200);
    expect(second.refresh_token).toBeDefined();
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(second.expires_in).toBe(LIFETIME_SECONDS);
    expectLive(second);

    const reuse = await refresh(first.refresh_token!);

    expect(reuse.status).toBe(400);
    expect(reuse.json.error).toBe('invalid_grant');
    expectRejected(second);
    expect((await refresh(second.refresh_token!)).json.error).toBe('invalid_grant');
  });

  it('refuses an unknown refresh token', async () => {
    expect((await refresh('no-such-token')).json).toEqual({
      error: 'invalid_grant',
      error_description: expect.any(String),
    });
  });

  it('may narrow the scope, never widen it', async () => {
    const tokens = await obtainTokens(emulator, 'read_orders read_menu');

    expect((await refresh(tokens.refresh_token!, { scope: 'read_orders write_menu' })).json.error).toBe(
      'invalid_scope',
    );
    const narrowed = (await refresh(tokens.refresh_token!, { scope: 'read_orders' })).json as TokenAnswer;

    expect(narrowed.scope).toBe('read_orders');
    const error = refusal(`Bearer ${narrowed.access_token}`, 'read_menu');
    expect(error?.status).toBe(403);
    expect(error?.headers['WWW-Authenticate']).toBe('Bearer error="insufficient_scope" scope="read_menu"');
    expect((await refresh(narrowed.refresh_token!)).json.scope).toBe('read_orders read_menu');
  });

  it('keeps the refresh token when keep_refresh_tokens is set', async () => {
    const tokens = await obtainTokens(emulator);
    await setFaults({ keep_refresh_tokens: true });

    const first = await refresh(tokens.refresh_token!);
    const again = await refresh(tokens.refresh_token!);

    expect(first.status).toBe(200);
    expect(first.json).not.toHaveProperty('refresh_token');
    expect(again.status).toBe(200);
    expectLive(again.json as TokenAnswer);
  });
});

describe('token faults and expiry', () => {
  it('answers 503 temporarily_unavailable to the next N token requests, then works', async () => {
    const tokens = await obtainTokens(emulator);
    await setFaults({ token_endpoint_failures: 2 });

    const replies = [
      await refresh(tokens.refresh_token!),
      await refresh(tokens.refresh_token!),
      await refresh(tokens.refresh_token!),
    ];

    expect(replies.map((reply) => reply.status)).toEqual([503, 503, 200]);
    expect(replies[0].json.error).toBe('temporarily_unavailable');
    expect(replies[0].headers.get('retry-after')).toBe('1');
  });

  it('expires an access token after expires_in seconds', async () => {
    const tokens = await obtainTokens(emulator);
    const clock = emulator.app.get(Clock);

    clock.advance((LIFETIME_SECONDS - 1) * 1000);
    expectLive(tokens);
    clock.advance(1000);
    expectRejected(tokens);
    expect((await refresh(tokens.refresh_token!)).status).toBe(200);
  });

  it('expires access tokens early under token_expiry_seconds', async () => {
    const tokens = await obtainTokens(emulator);
    await setFaults({ token_expiry_seconds: 60 });

    emulator.app.get(Clock).advance(59_000);
    expectLive(tokens);
    emulator.app.get(Clock).advance(1000);
    expectRejected(tokens);
  });

  it('POST /_emulator/tokens/expire expires every live access token', async () => {
    const tokens = await obtainTokens(emulator);

    const reply = await control(emulator, 'POST', '/_emulator/tokens/expire');

    expect(reply.status).toBe(200);
    expect(reply.json.expired).toBeGreaterThanOrEqual(1);
    expectRejected(tokens);
    expect((await control(emulator, 'POST', '/_emulator/tokens/expire')).json).toEqual({ expired: 0 });
  });

  it('refuses a missing or unknown bearer token with a JSON:API 401', () => {
    const missing = refusal(undefined);
    const unknown = refusal('Bearer nope');

    expect(missing?.status).toBe(401);
    expect(missing?.headers['WWW-Authenticate']).toBe('Bearer');
    expect(unknown?.status).toBe(401);
    expect(unknown?.headers['WWW-Authenticate']).toBe('Bearer error="invalid_token"');
    expect(unknown?.body).toEqual({ errors: [{ status: '401', title: 'Unauthorized', detail: expect.any(String) }] });
  });

  it('GET /stores/{id}/orders answers 401 without a token and after expiry, not with a live token', async () => {
    const tokens = await obtainTokens(emulator);
    const orders = (token?: string) =>
      call(emulator, '/stores/1/orders', { headers: token ? { authorization: `Bearer ${token}` } : {} });

    const anonymous = await orders();
    const live = await orders(tokens.access_token);
    await control(emulator, 'POST', '/_emulator/tokens/expire');
    const expired = await orders(tokens.access_token);

    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer');
    expect(live.status).not.toBe(401);
    expect(expired.status).toBe(401);
    expect(expired.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
    expect(expired.headers.get('content-type')).toMatch(/^application\/vnd\.api\+json/);
  });
});

describe("GET /oauth/token/info (Doorkeeper's TokenInfoController)", () => {
  const info = (headers: Record<string, string> = {}, query = '') =>
    call(emulator, `/oauth/token/info${query}`, { headers });

  it("answers Doorkeeper's AccessToken#as_json for the bearer token: owner, scopes, seconds left, application, issue time", async () => {
    const tokens = await obtainTokens(emulator, 'read_menu read_orders');
    const reply = await info({ authorization: `Bearer ${tokens.access_token}` });

    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
    expect(reply.json).toEqual({
      resource_owner_id: Number(DEMO_USER_ID),
      scope: ['read_menu', 'read_orders'],
      expires_in: expect.any(Number),
      application: { uid: clientOf(emulator).client_id },
      created_at: tokens.created_at,
    });
    expect(reply.json.expires_in).toBeGreaterThan(LIFETIME_SECONDS - 5);
    expect(reply.json.expires_in).toBeLessThanOrEqual(LIFETIME_SECONDS);
    expect((await info({}, `?access_token=${encodeURIComponent(tokens.access_token)}`)).json.resource_owner_id).toBe(
      Number(DEMO_USER_ID),
    );
  });

  it('answers 401 invalid_token without a token, for an unknown one, and for an expired one', async () => {
    const tokens = await obtainTokens(emulator);
    emulator.app.get(OAuthServer).expireAccessTokens();
    for (const headers of [
      {},
      { authorization: 'Bearer nope' },
      { authorization: `Bearer ${tokens.access_token}` },
    ] as Array<Record<string, string>>) {
      const reply = await info(headers);
      expect(reply.status).toBe(401);
      expect(reply.json).toEqual({ error: 'invalid_token', error_description: expect.any(String) });
      expect(reply.headers.get('www-authenticate')).toMatch(/^Bearer .*error="invalid_token"/);
    }
  });

  it('answers an injected status (token_info_status), as a server without the endpoint would', async () => {
    const tokens = await obtainTokens(emulator);
    await setFaults({ token_info_status: 404 });
    expect((await info({ authorization: `Bearer ${tokens.access_token}` })).status).toBe(404);
    await setFaults({});
    expect((await info({ authorization: `Bearer ${tokens.access_token}` })).status).toBe(200);
  });
});

describe('GET /_emulator/token_requests', () => {
  it('records every token request with its grant type and status, and no secret', async () => {
    const own = await bootEmulator();
    try {
      const tokens = await obtainTokens(own);
      await postToken(own, {
        grant_type: 'refresh_token',
        refresh_token: tokens.refresh_token!,
        ...clientOf(own),
        client_secret: 'wrong',
      });
      await postToken(own, { grant_type: 'password', ...clientOf(own) });

      const reply = await call(own, '/_emulator/token_requests');

      expect(reply.status).toBe(200);
      expect(reply.json.data).toEqual([
        {
          grant_type: 'authorization_code',
          status: 200,
          error: null,
          at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
        },
        { grant_type: 'refresh_token', status: 401, error: 'invalid_client', at: expect.any(String) },
        { grant_type: 'password', status: 400, error: 'unsupported_grant_type', at: expect.any(String) },
      ]);
      for (const secret of [tokens.access_token, tokens.refresh_token!, clientOf(own).client_secret]) {
        expect(reply.text).not.toContain(secret);
      }
    } finally {
      await own.close();
    }
  });
});

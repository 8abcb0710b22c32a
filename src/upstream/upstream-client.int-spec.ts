import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DataSource } from 'typeorm';
import { bootEmulator, call, clientOf, control, obtainTokens, postToken } from '../../test/emulator/emulator-client.js';
import { createTestDatabase, openDataSource } from '../../test/support/database.js';
import type { TestDatabase } from '../../test/support/database.js';
import type { Connection, TokenSet } from '../connections/connection.js';
import { ConnectionRepository } from '../connections/connection.repository.js';
import { SecretCipher } from '../common/secret-cipher.js';
import { loadConfig } from '../config/app-config.js';
import type { AppConfig } from '../config/app-config.js';
import { ConfigModule } from '../config/config.module.js';
import { DatabaseModule } from '../database/database.module.js';
import type { RunningEmulator } from '../emulator/emulator.factory.js';
import type { TokenAnswer } from '../emulator/oauth/oauth-server.service.js';
import { MetricsService } from '../observability/metrics.service.js';
import { PROJECTIONS } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { ProjectionStatusRepository } from '../projection/projection-status.repository.js';
import { RebuildService } from '../replay/rebuild.service.js';
import { ShadowSchemaRepository } from '../replay/shadow-schema.repository.js';
import { ObservabilityModule } from '../observability/observability.module.js';
import { OAuthClient } from './oauth-client.js';
import { RateBudget } from './rate-budget.js';
import { TokenRefresher } from './token-refresher.js';
import { UpstreamClient } from './upstream-client.js';
import { ReauthorizationRequiredError, UpstreamUnavailableError } from './upstream.errors.js';
import { UpstreamSettings } from './upstream-settings.js';
import { UpstreamSettingsModule } from './upstream-settings.module.js';
import { UpstreamModule } from './upstream.module.js';
import { DEFAULT_UPSTREAM_TIMINGS } from './upstream-timings.js';
import type { UpstreamTimings } from './upstream-timings.js';

const LIFETIME_SECONDS = 3600;
const MEDIA_TYPE = 'application/vnd.service.v2';
const KEY = randomBytes(32);
const FAST: Partial<UpstreamTimings> = { baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 50, timeoutMs: 2_000 };
const ORDERS = { method: 'GET', path: '/stores/1/orders' } as const;

/** One daemon process's view: its own pool, cache, single flights and metrics. */
interface Stack {
  dataSource: DataSource;
  repository: ConnectionRepository;
  metrics: MetricsService;
  refresher: TokenRefresher;
  client: UpstreamClient;
}

interface Recorded {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A tiny upstream whose answers each test scripts, recording what it was sent. */
class ScriptedServer {
  readonly requests: Recorded[] = [];
  handler: (request: Recorded, response: ServerResponse) => void = (_request, response) => response.end('{}');
  private readonly server: Server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      const recorded = { method: request.method!, url: request.url!, headers: request.headers, body };
      this.requests.push(recorded);
      this.handler(recorded, response);
    });
  });

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

describe('UpstreamClient (PostgreSQL + emulator)', () => {
  let database: TestDatabase;
  let emulator: RunningEmulator;
  let config: AppConfig;
  let settings: UpstreamSettings;
  let scripted: ScriptedServer;
  let scriptedUrl: string;
  const stacks: Stack[] = [];

  beforeAll(async () => {
    Logger.overrideLogger(false);
    database = await createTestDatabase();
    emulator = await bootEmulator({ tokenLifetimeSeconds: LIFETIME_SECONDS });
    config = loadConfig({
      DATABASE_URL: database.url,
      TOKEN_ENCRYPTION_KEY: KEY.toString('base64'),
      UPSTREAM_MEDIA_TYPE: MEDIA_TYPE,
    });
    settings = UpstreamSettings.emulator(
      config,
      emulator.url,
      [],
      clientOf(emulator).client_id,
      clientOf(emulator).client_secret,
    );
    scripted = new ScriptedServer();
    scriptedUrl = await scripted.listen();
  });

  afterAll(async () => {
    await scripted.close();
    await emulator.close();
    await database.drop();
  });

  beforeEach(async () => {
    await control(emulator, 'POST', '/_emulator/faults', {});
  });

  afterEach(async () => {
    for (const stack of stacks.splice(0)) await stack.dataSource.destroy();
  });

  async function stack(timings: Partial<UpstreamTimings> = FAST, url = database.url): Promise<Stack> {
    const dataSource = await openDataSource(url, 5);
    const repository = new ConnectionRepository(dataSource, SecretCipher.fromKey(KEY));
    const metrics = new MetricsService();
    const all = { ...DEFAULT_UPSTREAM_TIMINGS, ...timings };
    const refresher = new TokenRefresher(repository, new OAuthClient(all), metrics, settings, all);
    const created = {
      dataSource,
      repository,
      metrics,
      refresher,
      client: new UpstreamClient(refresher, new RateBudget(1000), metrics, settings, all),
    };
    stacks.push(created);
    return created;
  }

  function tokenSetOf(answer: TokenAnswer, createdAt = new Date(answer.created_at * 1000)): TokenSet {
    return {
      accessToken: answer.access_token,
      refreshToken: answer.refresh_token ?? null,
      createdAt,
      expiresIn: answer.expires_in,
    };
  }

  async function connect(
    on: Stack,
    options: { baseUrl?: string; createdAt?: Date } = {},
  ): Promise<{ connection: Connection; answer: TokenAnswer }> {
    const answer = await obtainTokens(emulator);
    const connection = await on.repository.create({
      authUrl: emulator.url,
      baseUrl: options.baseUrl ?? emulator.url,
      scopes: answer.scope.split(' '),
      tokens: tokenSetOf(answer, options.createdAt),
    });
    return { connection, answer };
  }

  /** The token endpoint requests from here on. */
  async function tokenRequestsSince(): Promise<
    () => Promise<{ grant_type: string; status: number; error: string | null }[]>
  > {
    const seen = (await call(emulator, '/_emulator/token_requests')).json.data.length;
    return async () => (await call(emulator, '/_emulator/token_requests')).json.data.slice(seen);
  }

  async function counts(
    counter: MetricsService['upstreamRequests'] | MetricsService['tokenRefreshes'],
  ): Promise<Record<string, number>> {
    const values = (await counter.get()).values;
    return Object.fromEntries(values.map((value) => [Object.values(value.labels)[0], value.value]));
  }

  it('sends the bearer token, the versioned Accept header and form bodies, and reads JSON answers', async () => {
    const primary = await stack();
    const { connection, answer } = await connect(primary, { baseUrl: scriptedUrl });
    scripted.handler = (_request, response) =>
      response.writeHead(201, { 'content-type': 'application/vnd.api+json' }).end('{"data":{"id":"7"}}');
    const form = new URLSearchParams([
      ['callback_uri', 'http://127.0.0.1:3000/webhooks/k'],
      ['enabled_events[]', 'product.created'],
      ['enabled_events[]', 'order.created'],
    ]);

    const created = await primary.client.request(connection.id, {
      method: 'POST',
      path: '/webhook_endpoints',
      form,
      versioned: true,
    });
    scripted.handler = (_request, response) =>
      response.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>');
    const listed = await primary.client.request(connection.id, {
      method: 'GET',
      path: '/stores/1/products',
      query: { 'page[size]': '2' },
    });

    expect(created).toMatchObject({ status: 201, json: { data: { id: '7' } }, text: '{"data":{"id":"7"}}' });
    expect(listed).toMatchObject({ status: 200, json: undefined, text: '<html></html>' });
    const [post, get] = scripted.requests.splice(0);
    expect(post).toMatchObject({ method: 'POST', url: '/webhook_endpoints', body: form.toString() });
    expect(post.headers).toMatchObject({
      authorization: `Bearer ${answer.access_token}`,
      accept: MEDIA_TYPE,
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(get).toMatchObject({ method: 'GET', url: '/stores/1/products?page%5Bsize%5D=2', body: '' });
    expect(get.headers.authorization).toBe(`Bearer ${answer.access_token}`);
    expect(get.headers.accept).not.toBe(MEDIA_TYPE);
    expect(await counts(primary.metrics.upstreamRequests)).toEqual({ 201: 1, 200: 1 });
  });

  it('registers a webhook endpoint at the emulator (spec endpoint 4) and lists orders (endpoint 3)', async () => {
    const primary = await stack();
    const { connection } = await connect(primary);
    const form = new URLSearchParams([
      ['callback_uri', 'http://127.0.0.1:9/webhooks/key'],
      ['enabled_events[]', 'product.updated'],
    ]);

    const created = await primary.client.request(connection.id, {
      method: 'POST',
      path: '/webhook_endpoints',
      form,
      versioned: true,
    });
    const orders = await primary.client.request(connection.id, ORDERS);

    expect(created.status).toBe(201);
    expect(orders).toMatchObject({ status: 200, json: { data: [] } });
    const endpoints = (await call(emulator, '/_emulator/webhook_endpoints')).json.data;
    expect(endpoints.at(-1)).toMatchObject({
      callback_uri: 'http://127.0.0.1:9/webhooks/key',
      enabled_events: ['product.updated'],
    });
    expect(JSON.stringify(endpoints.at(-1))).toContain(MEDIA_TYPE);
  });

  it('refreshes before expiry: one refresh grant, then the new token for every call', async () => {
    const primary = await stack();
    const almostExpired = new Date(Date.now() - (LIFETIME_SECONDS - 60) * 1000);
    const { connection, answer } = await connect(primary, { createdAt: almostExpired });
    const tokenRequests = await tokenRequestsSince();

    const replies = [
      await primary.client.request(connection.id, ORDERS),
      await primary.client.request(connection.id, ORDERS),
    ];

    expect(replies.map((reply) => reply.status)).toEqual([200, 200]);
    expect(await tokenRequests()).toEqual([
      { grant_type: 'refresh_token', status: 200, error: null, at: expect.any(String) },
    ]);
    const stored = (await primary.repository.find(connection.id))!;
    expect(stored).toMatchObject({ tokenVersion: 2, state: 'active', expiresIn: LIFETIME_SECONDS });
    expect(stored.accessToken).not.toBe(answer.access_token);
    expect(Math.abs(stored.tokenCreatedAt.getTime() - Date.now())).toBeLessThan(5_000);
    expect(await counts(primary.metrics.tokenRefreshes)).toEqual({ success: 1 });
    expect(await counts(primary.metrics.upstreamRequests)).toEqual({ 200: 2 });
  });

  it('refreshes once on a 401 and retries once with the new token', async () => {
    const primary = await stack();
    const { connection } = await connect(primary);
    await primary.client.request(connection.id, ORDERS);
    await control(emulator, 'POST', '/_emulator/tokens/expire');
    const tokenRequests = await tokenRequestsSince();

    const reply = await primary.client.request(connection.id, ORDERS);

    expect(reply.status).toBe(200);
    expect((await tokenRequests()).map((request) => request.grant_type)).toEqual(['refresh_token']);
    expect(await counts(primary.metrics.upstreamRequests)).toEqual({ 200: 2, 401: 1 });
    expect((await primary.repository.find(connection.id))!.tokenVersion).toBe(2);
  });

  it('answers a 401 that survives the refresh as is, after exactly one refresh and one retry', async () => {
    const primary = await stack();
    const { connection } = await connect(primary, { baseUrl: scriptedUrl });
    scripted.handler = (_request, response) =>
      response.writeHead(401, { 'content-type': 'application/json' }).end('{"errors":[]}');
    const tokenRequests = await tokenRequestsSince();

    const reply = await primary.client.request(connection.id, ORDERS);

    expect(reply).toMatchObject({ status: 401, json: { errors: [] } });
    const [first, second] = scripted.requests.splice(0);
    expect(first.headers.authorization).not.toBe(second.headers.authorization);
    expect(await tokenRequests()).toHaveLength(1);
  });

  it.each([
    ['rejected with 401', { expire: true, old: false }],
    ['due for refresh', { expire: false, old: true }],
  ])('gives 20 concurrent calls from two processes on a token %s exactly one refresh grant', async (_name, how) => {
    const [one, two] = [await stack(), await stack()];
    const createdAt = how.old ? new Date(Date.now() - (LIFETIME_SECONDS - 60) * 1000) : undefined;
    const { connection } = await connect(one, { createdAt });
    if (how.expire) await control(emulator, 'POST', '/_emulator/tokens/expire');
    const tokenRequests = await tokenRequestsSince();

    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? one : two).client.request(connection.id, ORDERS)),
    );

    expect(replies.map((reply) => reply.status)).toEqual(Array(20).fill(200));
    expect(await tokenRequests()).toEqual([
      { grant_type: 'refresh_token', status: 200, error: null, at: expect.any(String) },
    ]);
    expect((await one.repository.find(connection.id))!.tokenVersion).toBe(2);
    const refreshes = { ...(await counts(one.metrics.tokenRefreshes)), ...(await counts(two.metrics.tokenRefreshes)) };
    expect(refreshes).toEqual({ success: 1 });
  });

  it('stores a rotated refresh token in place of the old one, and keeps the old one when none comes back', async () => {
    const primary = await stack();
    const { connection, answer } = await connect(primary);
    await control(emulator, 'POST', '/_emulator/tokens/expire');
    await primary.client.request(connection.id, ORDERS);
    const rotated = (await primary.repository.find(connection.id))!;

    expect(rotated.refreshToken).not.toBe(answer.refresh_token);
    expect(
      (
        await postToken(emulator, {
          grant_type: 'refresh_token',
          refresh_token: answer.refresh_token!,
          ...clientOf(emulator),
        })
      ).json,
    ).toMatchObject({ error: 'invalid_grant' });

    const other = await connect(primary);
    await control(emulator, 'POST', '/_emulator/faults', { keep_refresh_tokens: true });
    await control(emulator, 'POST', '/_emulator/tokens/expire');
    await primary.client.request(other.connection.id, ORDERS);
    const kept = (await primary.repository.find(other.connection.id))!;

    expect(kept).toMatchObject({ tokenVersion: 2, refreshToken: other.answer.refresh_token });
    expect(kept.accessToken).not.toBe(other.answer.access_token);
  });

  it('marks a connection whose grant was revoked (a rotated refresh token reused) reauthorization_required, then fails fast', async () => {
    const [primary, secondary] = [await stack(), await stack()];
    const { connection, answer } = await connect(primary);
    await control(emulator, 'POST', '/_emulator/tokens/expire');
    await primary.client.request(connection.id, ORDERS);
    const rotated = (await primary.repository.find(connection.id))!.refreshToken!;
    // Someone replays the old refresh token: the platform revokes every token of the grant.
    await postToken(emulator, {
      grant_type: 'refresh_token',
      refresh_token: answer.refresh_token!,
      ...clientOf(emulator),
    });
    const tokenRequests = await tokenRequestsSince();

    const error = await primary.client.request(connection.id, ORDERS).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(ReauthorizationRequiredError);
    for (const secret of [answer.refresh_token!, rotated, answer.access_token, settings.clientSecret]) {
      expect(JSON.stringify({ message: (error as Error).message, error })).not.toContain(secret);
    }
    expect(await tokenRequests()).toEqual([
      { grant_type: 'refresh_token', status: 400, error: 'invalid_grant', at: expect.any(String) },
    ]);
    expect(await primary.repository.find(connection.id)).toMatchObject({
      state: 'reauthorization_required',
      lastError: expect.stringMatching(/^invalid_grant/),
    });
    expect(await counts(primary.metrics.tokenRefreshes)).toEqual({ success: 1, invalid_grant: 1 });
    const calls = await counts(primary.metrics.upstreamRequests);

    for (const client of [primary.client, primary.client, secondary.client]) {
      await expect(client.request(connection.id, ORDERS)).rejects.toBeInstanceOf(ReauthorizationRequiredError);
    }
    expect(await tokenRequests()).toHaveLength(1);
    expect(await counts(primary.metrics.upstreamRequests)).toEqual(calls);
    expect(await counts(secondary.metrics.upstreamRequests)).toEqual({});

    const renewed = await obtainTokens(emulator);
    await primary.repository.withLocked(connection.id, (_c, manager) =>
      primary.repository.saveTokens(manager, connection.id, tokenSetOf(renewed)),
    );
    expect((await primary.client.request(connection.id, ORDERS)).status).toBe(200);
  });

  it('retries 500s and a 429 (waiting its Retry-After), counting every answer', async () => {
    const primary = await stack({ ...FAST, maxRetryAfterMs: 60_000 });
    const { connection } = await connect(primary);

    await control(emulator, 'POST', '/_emulator/faults', { api_failures: 2, api_error_status: 500 });
    expect((await primary.client.request(connection.id, ORDERS)).status).toBe(200);
    await control(emulator, 'POST', '/_emulator/faults', { api_failures: 1, api_error_status: 429 });
    // The wait the client chose (logged), not the time that passed: the 429 carries Retry-After: 1.
    const warnings: string[] = [];
    Logger.overrideLogger({ log() {}, error() {}, warn: (message: unknown) => warnings.push(String(message)) });
    try {
      expect((await primary.client.request(connection.id, ORDERS)).status).toBe(200);
    } finally {
      Logger.overrideLogger(false);
    }

    const waits = warnings
      .map((warning) => /HTTP 429; retrying in (\d+) ms/.exec(warning)?.[1])
      .filter((ms) => ms !== undefined)
      .map(Number);
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThanOrEqual(1000);
    expect(await counts(primary.metrics.upstreamRequests)).toEqual({ 500: 2, 429: 1, 200: 2 });
  });

  it('gives up after the configured attempts with UpstreamUnavailableError, and answers other 4XX as they are', async () => {
    const primary = await stack({ ...FAST, attempts: 3 });
    const { connection } = await connect(primary);

    await control(emulator, 'POST', '/_emulator/faults', { api_failures: 5, api_error_status: 503 });
    await expect(primary.client.request(connection.id, ORDERS)).rejects.toBeInstanceOf(UpstreamUnavailableError);
    await control(emulator, 'POST', '/_emulator/faults', {});
    const missing = await primary.client.request(connection.id, { method: 'GET', path: '/stores/999/orders' });

    expect(missing).toMatchObject({ status: 404, json: { errors: [expect.objectContaining({ status: '404' })] } });
    expect(await counts(primary.metrics.upstreamRequests)).toEqual({ 503: 3, 404: 1 });
  });

  it('retries network faults and timeouts of a GET (counted as 0), but not of a POST that may have arrived', async () => {
    const primary = await stack({ ...FAST, timeoutMs: 150 });
    const { connection } = await connect(primary, { baseUrl: scriptedUrl });
    let failures = 2;
    scripted.handler = (_request, response) => {
      failures -= 1;
      if (failures === 1) response.socket?.destroy();
      else if (failures === 0)
        return; // never answered: a timeout
      else
        response
          .writeHead(200, { 'content-type': 'application/json', 'retry-after': 'Thu, 01 Jan 1970 00:00:00 GMT' })
          .end('{"ok":true}');
    };

    expect(await primary.client.request(connection.id, { method: 'GET', path: '/stores/1/orders' })).toMatchObject({
      status: 200,
      json: { ok: true },
    });
    expect(await counts(primary.metrics.upstreamRequests)).toEqual({ 0: 2, 200: 1 });

    scripted.requests.splice(0);
    scripted.handler = (_request, response) => response.socket?.destroy();
    await expect(
      primary.client.request(connection.id, {
        method: 'POST',
        path: '/webhook_endpoints',
        form: new URLSearchParams({ a: 'b' }),
      }),
    ).rejects.toBeInstanceOf(UpstreamUnavailableError);
    expect(scripted.requests).toHaveLength(1);
  });

  it('retries a token endpoint answering 503 and, when it keeps failing, leaves the connection active', async () => {
    const primary = await stack();
    const { connection } = await connect(primary);
    await control(emulator, 'POST', '/_emulator/tokens/expire');
    await control(emulator, 'POST', '/_emulator/faults', { token_endpoint_failures: 2 });
    let tokenRequests = await tokenRequestsSince();

    expect((await primary.client.request(connection.id, ORDERS)).status).toBe(200);
    expect((await tokenRequests()).map((request) => request.status)).toEqual([503, 503, 200]);

    await control(emulator, 'POST', '/_emulator/tokens/expire');
    await control(emulator, 'POST', '/_emulator/faults', { token_endpoint_failures: 100 });
    tokenRequests = await tokenRequestsSince();
    await expect(primary.client.request(connection.id, ORDERS)).rejects.toBeInstanceOf(UpstreamUnavailableError);

    expect((await tokenRequests()).map((request) => request.status)).toEqual([503, 503, 503, 503]);
    expect(await primary.repository.find(connection.id)).toMatchObject({ state: 'active', tokenVersion: 2 });
    expect(await counts(primary.metrics.tokenRefreshes)).toEqual({ success: 1, error: 1 });

    await control(emulator, 'POST', '/_emulator/faults', {});
    expect((await primary.client.request(connection.id, ORDERS)).status).toBe(200);
  });

  it('is wired by UpstreamModule (metrics from the global ObservabilityModule)', async () => {
    const primary = await stack();
    const { connection } = await connect(primary);
    const module = await Test.createTestingModule({
      imports: [
        ConfigModule.forRoot(config),
        UpstreamSettingsModule.forRoot(settings),
        DatabaseModule.forRoot({ url: database.url, poolSize: 2 }),
        ObservabilityModule,
        UpstreamModule,
      ],
    }).compile();
    try {
      const reply = await module.get(UpstreamClient).request(connection.id, ORDERS);
      expect(reply.status).toBe(200);
      expect(await counts(module.get(MetricsService).upstreamRequests)).toEqual({ 200: 1 });
    } finally {
      await module.close();
    }
  });

  it('keeps using a token due for refresh while the token endpoint is down, until it expires', async () => {
    const primary = await stack();
    const { connection, answer } = await connect(primary, {
      createdAt: new Date(Date.now() - (LIFETIME_SECONDS - 60) * 1000),
    });
    await control(emulator, 'POST', '/_emulator/faults', { token_endpoint_failures: 100 });
    const tokenRequests = await tokenRequestsSince();

    expect((await primary.client.request(connection.id, ORDERS)).status).toBe(200);

    expect((await tokenRequests()).map((request) => request.status)).toEqual([503, 503, 503, 503]);
    expect(await primary.repository.find(connection.id)).toMatchObject({
      state: 'active',
      tokenVersion: 1,
      accessToken: answer.access_token,
    });
    expect(await counts(primary.metrics.tokenRefreshes)).toEqual({ error: 1 });
  });

  it('keeps only ciphertext in the database: no sealed column holds the bytes of any token', async () => {
    const primary = await stack();
    await connect(primary);
    await connect(primary);
    const connections = await primary.repository.list();
    const secrets = connections
      .flatMap((c) => [c.accessToken, c.refreshToken])
      .filter((secret): secret is string => secret !== null);
    expect(secrets.length).toBeGreaterThanOrEqual(4);

    const rows: { access_token: Buffer; refresh_token: Buffer | null; row: string }[] = await primary.dataSource.query(
      `SELECT access_token, refresh_token, row_to_json(c)::text AS row FROM connections c`,
    );

    for (const row of rows) {
      for (const secret of secrets) {
        expect(row.access_token.includes(Buffer.from(secret))).toBe(false);
        expect(row.refresh_token?.includes(Buffer.from(secret)) ?? false).toBe(false);
        expect(row.row).not.toContain(secret);
        expect(row.row).not.toContain(Buffer.from(secret).toString('hex'));
      }
    }
  });

  /**
   * The connection-refresh and rebuild locks once shared a key space, so connection 1 and the menu
   * projection (rebuild key 1) took the same lock. On a database of their own (so the connection
   * is number 1), where any lock wait over 500 ms is an error rather than a hang; each test its own.
   */
  describe('a token refresh and a replay of the menu projection do not wait on each other', () => {
    const menu = PROJECTIONS.find((projection) => projection.name === 'menu')!;
    let own: TestDatabase;

    beforeEach(async () => {
      own = await createTestDatabase();
      await dataSourceQuery(database.url, `ALTER DATABASE ${own.name} SET lock_timeout = '500ms'`);
    });

    afterEach(async () => {
      for (const stack of stacks.splice(0)) await stack.dataSource.destroy();
      await own?.drop();
    });

    it('refreshes connection 1 while a replay holds the menu rebuild lock', async () => {
      const primary = await stack(FAST, own.url);
      const { connection, answer } = await connect(primary);
      expect(connection.id).toBe(menu.lockKey);
      const replay = primary.dataSource.createQueryRunner();
      await replay.connect();
      try {
        expect(await new ShadowSchemaRepository().tryLock(replay, menu)).toBe(true);
        const tokenRequests = await tokenRequestsSince();
        const before = await primary.refresher.accessToken(connection.id);

        const after = await primary.refresher.refreshAfterRejection(connection.id, before.version);

        expect(after.version).toBeGreaterThan(before.version);
        expect(after.token).not.toBe(answer.access_token);
        expect((await tokenRequests()).map((request) => [request.grant_type, request.status])).toEqual([
          ['refresh_token', 200],
        ]);
        expect(await counts(primary.metrics.tokenRefreshes)).toEqual({ success: 1 });
      } finally {
        await replay.query('SELECT pg_advisory_unlock_all()');
        await replay.release();
      }
    });

    it('replays the menu projection while a refresh of connection 1 holds its lock', async () => {
      const primary = await stack(FAST, own.url);
      const { connection } = await connect(primary);
      expect(connection.id).toBe(menu.lockKey);
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => (entered = resolve));
      const refreshing = primary.repository.withLocked(connection.id, async () => {
        entered();
        await held;
      });
      try {
        await inside;
        const rebuild = new RebuildService(
          primary.dataSource,
          new ProjectionRepository(),
          new ProjectionStatusRepository(primary.dataSource),
          new ShadowSchemaRepository(),
        );

        const report = await rebuild.replay(menu);

        expect(report).toMatchObject({ projection: 'menu', applied: 0, parked: 0 });
      } finally {
        release();
        await refreshing;
      }
    });
  });
});

async function dataSourceQuery(url: string, sql: string): Promise<void> {
  const dataSource = await openDataSource(url, 1);
  try {
    await dataSource.query(sql);
  } finally {
    await dataSource.destroy();
  }
}

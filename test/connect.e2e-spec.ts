import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import pg from 'pg';
import { SPEC_EVENT_NAMES } from '../src/domain/event-names.js';
import type { RunningEmulator } from '../src/emulator/emulator.factory.js';
import type { TokenAnswer } from '../src/emulator/oauth/oauth-server.service.js';
import { bootEmulator, call, control, recordIssuedTokens } from './emulator/emulator-client.js';
import { CliResult, describeRun, runCli } from './support/cli.js';
import { eventually } from './support/eventually.js';
import { authorize as connectFlow, get, startDaemonOn } from './support/connect.js';
import { api, API_TOKEN, RunningDaemon } from './support/http.js';

/**
 * docs/reference.md §6 and §7 against the emulator: the browser connect flow (authorization request with
 * a single-use state and PKCE, callback, code exchange, stored connection, registered webhook
 * endpoint), the exact registration request the upstream receives, a delivery to the registered
 * key, refused callbacks storing nothing, the out-of-band CLI flow and `menu-sync subscribe`, and
 * no token or webhook key in a pg_dump of the database or in any log.
 * One emulator in this process, one built daemon as a child process whose PUBLIC_URL is its own address.
 */

const PG_DUMP = existsSync('/usr/lib/postgresql/15/bin/pg_dump') ? '/usr/lib/postgresql/15/bin/pg_dump' : 'pg_dump';
const OOB = 'urn:ietf:wg:oauth:2.0:oob';
const DEFAULT_SCOPES = 'read_menu+read_orders+read_stores';

let emulator: RunningEmulator;
let daemon: RunningDaemon;
let publicUrl: string;
let db: pg.Client;
/** Every token answer the emulator gave: the values that must never show up on the daemon's side. */
let issued: TokenAnswer[] = [];
/** Output of every CLI run, searched for secrets at the end. */
const cliOutput: string[] = [];

const sha256 = (text: string) => createHash('sha256').update(text).digest();

async function count(table: string): Promise<number> {
  const { rows } = await db.query(`SELECT count(*)::int AS n FROM ${table}`);
  return rows[0].n;
}

async function storedCounts(): Promise<Record<string, number>> {
  return {
    connections: await count('connections'),
    subscriptions: await count('subscriptions'),
    webhook_keys: await count('webhook_keys'),
  };
}

const authorize = () => connectFlow(daemon.url);

async function cli(args: string[]): Promise<CliResult> {
  const env = { ...daemon.process.env };
  delete env.PATH;
  delete env.HOME;
  const result = await runCli(args, env, daemon.process.cwd);
  cliOutput.push(result.stdout, result.stderr);
  return result;
}

/** The indented JSON document a command printed on stdout (log lines are single-line JSON). */
function printed(result: CliResult): any {
  const match = /^\{\n[\s\S]*?^\}$/m.exec(result.stdout);
  if (!match) throw new Error(`no JSON document in the output:\n${describeRun(result)}`);
  return JSON.parse(match[0]);
}

async function connections(): Promise<any[]> {
  const answer = await api(daemon.url, '/api/v1/connections');
  expect(answer.status).toBe(200);
  return answer.json.data;
}

async function endpoints(): Promise<any[]> {
  return (await call(emulator, '/_emulator/webhook_endpoints')).json.data;
}

beforeAll(async () => {
  emulator = await bootEmulator({ demoData: true });
  issued = recordIssuedTokens(emulator);
  daemon = await startDaemonOn(emulator);
  publicUrl = daemon.url;
  db = new pg.Client({ connectionString: daemon.database.url });
  await db.connect();
}, 120_000);

afterAll(async () => {
  await db?.end();
  await daemon?.close();
  await emulator?.close();
});

describe('the browser connect flow', () => {
  let callbackUrl: string;

  it('refuses to start a connection without the API token (bearer or ?api_token=), storing nothing', async () => {
    const before = await count('oauth_authorizations');
    expect((await get(`${daemon.url}/auth/connect`)).status).toBe(401);
    expect((await get(`${daemon.url}/auth/connect?api_token=not-the-token-at-all`)).status).toBe(401);
    expect(await count('oauth_authorizations')).toBe(before);
    expect(
      (await get(`${daemon.url}/auth/connect`, { headers: { Authorization: `Bearer ${API_TOKEN}` } })).status,
    ).toBe(302);
  });

  it('redirects to the authorization request of reference §6, with a single-use state and PKCE S256', async () => {
    const start = await get(`${daemon.url}/auth/connect?api_token=${API_TOKEN}`);
    expect(start.status).toBe(302);
    expect(start.headers.get('cache-control')).toContain('no-store');
    const location = start.location!;
    expect(location.startsWith(`${emulator.url}/oauth/authorize?`)).toBe(true);
    // Scopes joined by a literal `+`, as the spec shows.
    expect(location).toMatch(/[?&]scope=read_menu\+read_orders\+read_stores(&|$)/);
    const query = new URL(location).searchParams;
    expect(query.get('client_id')).toBe('demo-client');
    expect(query.get('redirect_uri')).toBe(`${publicUrl}/auth/callback`);
    expect(query.get('response_type')).toBe('code');
    expect(query.get('state')).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    expect(query.get('code_challenge_method')).toBe('S256');
    expect(query.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // Only the state's hash is stored.
    const { rows } = await db.query('SELECT state_hash FROM oauth_authorizations');
    expect(rows.map((row) => row.state_hash.toString('hex'))).toContain(sha256(query.get('state')!).toString('hex'));
    expect(rows.some((row) => row.state_hash.toString('utf8').includes(query.get('state')!))).toBe(false);
  });

  it('exchanges the code on the callback, stores the connection, subscribes it, and shows no token', async () => {
    const flow = await authorize();
    callbackUrl = flow.callbackUrl;
    expect(callbackUrl.startsWith(`${publicUrl}/auth/callback?`)).toBe(true);
    expect(new URL(callbackUrl).searchParams.get('state')).toBe(flow.state);
    const answer = await get(callbackUrl);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('cache-control')).toContain('no-store');
    expect(answer.json.meta).toEqual({ outcome: 'created', retired: [] });
    const connection = answer.json.data;
    expect(connection).toMatchObject({
      id: 1,
      state: 'active',
      auth_url: emulator.url,
      base_url: emulator.url,
      scopes: ['read_menu', 'read_orders', 'read_stores'],
      mode: 'configured',
    });
    expect(Date.parse(connection.token.expires_at)).toBeGreaterThan(Date.now());
    expect(connection.subscriptions).toEqual([
      expect.objectContaining({ status: 'registered', callback_uri: `${publicUrl}/webhooks/[redacted]` }),
    ]);
    expect(issued.length).toBe(1);
    expect(answer.text).not.toContain(issued[0].access_token);
    expect(answer.text).not.toContain(issued[0].refresh_token!);
  });

  it('lists the connection with its token state and subscription at GET /api/v1/connections, behind the API token', async () => {
    expect((await api(daemon.url, '/api/v1/connections', null)).status).toBe(401);
    const answer = await api(daemon.url, '/api/v1/connections');
    expect(answer.status).toBe(200);
    expect(answer.json.data).toEqual([
      {
        id: 1,
        state: 'active',
        auth_url: emulator.url,
        base_url: emulator.url,
        scopes: ['read_menu', 'read_orders', 'read_stores'],
        owner_id: '4001',
        token: { expires_at: expect.any(String), last_refresh_at: null },
        last_error: null,
        subscriptions: [
          {
            id: 1,
            callback_uri: `${publicUrl}/webhooks/[redacted]`,
            enabled_events: [...SPEC_EVENT_NAMES],
            status: 'registered',
            upstream_id: '1',
            last_error: null,
            created_at: expect.any(String),
          },
        ],
        created_at: expect.any(String),
        mode: 'configured',
      },
    ]);
    for (const token of [issued[0].access_token, issued[0].refresh_token!]) expect(answer.text).not.toContain(token);
  });

  it('registered the webhook endpoint with the exact request of spec endpoint 4', async () => {
    const [endpoint] = await endpoints();
    expect(endpoint.callback_uri).toMatch(
      new RegExp(`^${publicUrl.replace(/[.]/g, '\\.')}/webhooks/[A-Za-z0-9_-]{43,}$`),
    );
    expect(endpoint.enabled_events).toEqual([...SPEC_EVENT_NAMES]);
    const { headers, form } = endpoint.request;
    expect(headers.accept).toBe('application/vnd.service.v2');
    expect(headers.authorization).toBe('[redacted]');
    expect(String(headers['content-type'])).toMatch(/^application\/x-www-form-urlencoded/);
    expect(form).toEqual({ callback_uri: endpoint.callback_uri, 'enabled_events[]': [...SPEC_EVENT_NAMES] });
    // The key is stored only as its hash, for this connection.
    const key = endpoint.callback_uri.split('/webhooks/')[1];
    const { rows } = await db.query('SELECT connection_id FROM webhook_keys WHERE key_hash = $1', [sha256(key)]);
    expect(rows).toEqual([{ connection_id: '1' }]);
  });

  it('accepts what the upstream delivers to the registered key', async () => {
    const triggered = await control(emulator, 'POST', '/_emulator/trigger', { event_type: 'product.updated' });
    expect(triggered.status).toBeLessThan(300);
    const [eventId] = triggered.json.event_ids;
    await eventually(
      async () => {
        const events = await api(daemon.url, '/api/v1/events?event_type=product.updated');
        expect(events.json.data.map((event: { event_id: string }) => event.event_id)).toContain(eventId);
      },
      15_000,
      100,
    );
    const deliveries = (await call(emulator, '/_emulator/deliveries')).json.data.filter(
      (delivery: { event_id: string }) => delivery.event_id === eventId,
    );
    expect(deliveries.map((delivery: { status: number }) => delivery.status)).toEqual([202]);
  });

  it('refuses a reused state with 400 and stores nothing', async () => {
    const before = await storedCounts();
    const tokenRequests = (await call(emulator, '/_emulator/token_requests')).json.data.length;
    const answer = await get(callbackUrl);
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toContain('application/problem+json');
    expect(answer.json).toMatchObject({ status: 400, type: 'urn:menu-sync:problem:invalid-state' });
    expect(await storedCounts()).toEqual(before);
    expect((await call(emulator, '/_emulator/token_requests')).json.data.length).toBe(tokenRequests);
  });
});

describe('refused callbacks store nothing', () => {
  let before: Record<string, number>;

  beforeEach(async () => {
    before = await storedCounts();
  });

  afterEach(async () => {
    expect(await storedCounts()).toEqual(before);
  });

  it('an unknown state → 400', async () => {
    const answer = await get(`${daemon.url}/auth/callback?code=whatever&state=${'x'.repeat(43)}`);
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({ type: 'urn:menu-sync:problem:invalid-state', field: 'state' });
  });

  it('an expired state → 400, even with a valid code', async () => {
    const { callbackUrl, state } = await authorize();
    await db.query(`UPDATE oauth_authorizations SET expires_at = now() - interval '1 second' WHERE state_hash = $1`, [
      sha256(state),
    ]);
    const answer = await get(callbackUrl);
    expect(answer.status).toBe(400);
    expect(answer.json.type).toBe('urn:menu-sync:problem:invalid-state');
  });

  it('no state or no code → 400 naming the parameter', async () => {
    const { state } = await authorize();
    const noState = await get(`${daemon.url}/auth/callback?code=abc`);
    expect(noState.status).toBe(400);
    expect(noState.json.field).toBe('state');
    const noCode = await get(`${daemon.url}/auth/callback?state=${state}`);
    expect(noCode.status).toBe(400);
    expect(noCode.json.field).toBe('code');
  });

  it('an error from the authorization server (access_denied) → 400 naming it, and the state is spent', async () => {
    const { state } = await authorize();
    const answer = await get(`${daemon.url}/auth/callback?error=access_denied&state=${state}`);
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({ type: 'urn:menu-sync:problem:authorization-denied', error: 'access_denied' });
    expect(answer.json.detail).toContain('access_denied');
    const { rows } = await db.query('SELECT used_at FROM oauth_authorizations WHERE state_hash = $1', [sha256(state)]);
    expect(rows[0].used_at).not.toBeNull();
  });

  it('a code the token endpoint refuses → 502 without secrets', async () => {
    const { callbackUrl } = await authorize();
    const url = new URL(callbackUrl);
    url.searchParams.set('code', 'not-a-code-the-server-issued');
    const answer = await get(url.toString());
    expect(answer.status).toBe(502);
    expect(answer.json).toMatchObject({ type: 'urn:menu-sync:problem:code-exchange-failed' });
    expect(answer.json.detail).toContain('invalid_grant');
    expect(answer.text).not.toContain('demo-secret');
    expect(answer.text).not.toContain('not-a-code-the-server-issued');
  });
});

describe('a subscription the upstream refuses', () => {
  it('keeps the connection, records the failure, and `menu-sync subscribe` registers it again', async () => {
    // Token info answering 404 leaves the owner unknown, so this connect makes a connection of its
    // own: the emulator's one user already has connection 1, which a connect would give the new tokens.
    await control(emulator, 'POST', '/_emulator/faults', {
      api_failures: 1,
      api_error_status: 422,
      token_info_status: 404,
    });
    const { callbackUrl } = await authorize();
    const answer = await get(callbackUrl);
    await control(emulator, 'POST', '/_emulator/faults', {});
    expect(answer.status).toBe(200);
    const connection = answer.json.data;
    expect(answer.json.meta).toEqual({ outcome: 'created', retired: [] });
    expect(connection).toMatchObject({ state: 'active', owner_id: null });
    expect(connection.subscriptions).toEqual([
      expect.objectContaining({ status: 'failed', upstream_id: null, last_error: expect.stringContaining('422') }),
    ]);
    // The refused key is no longer accepted.
    const { rows } = await db.query(
      'SELECT expires_at FROM webhook_keys WHERE id = (SELECT webhook_key_id FROM subscriptions WHERE id = $1)',
      [connection.subscriptions[0].id],
    );
    expect(rows[0].expires_at).not.toBeNull();

    const endpointsBefore = (await endpoints()).length;
    const result = await cli(['subscribe', '--connection', String(connection.id)]);
    expect(result.code).toBe(0);
    expect(printed(result).data).toEqual([
      expect.objectContaining({ connection_id: connection.id, status: 'registered' }),
    ]);
    expect((await endpoints()).length).toBe(endpointsBefore + 1);
    const listed = (await connections()).find((item) => item.id === connection.id);
    expect(listed.subscriptions.map((subscription: { status: string }) => subscription.status)).toEqual([
      'failed',
      'registered',
    ]);
  });

  it('`menu-sync subscribe` without --connection registers an endpoint for every active connection', async () => {
    const active = (await connections())
      .filter((connection) => connection.state === 'active')
      .map((connection) => connection.id);
    const endpointsBefore = (await endpoints()).length;
    const result = await cli(['subscribe']);
    expect(result.code).toBe(0);
    expect(
      printed(result).data.map((subscription: { connection_id: number; status: string }) => [
        subscription.connection_id,
        subscription.status,
      ]),
    ).toEqual(active.map((id) => [id, 'registered']));
    expect((await endpoints()).length).toBe(endpointsBefore + active.length);
    // Rotation with an overlap: per connection, the newest key has no expiry, every older one expires in about a day
    // (or already has: the key of a registration the upstream refused).
    const { rows } = await db.query(
      `SELECT connection_id, id, extract(epoch FROM expires_at - now())::int AS expires_in FROM webhook_keys
        WHERE connection_id = ANY($1) ORDER BY connection_id, id`,
      [active],
    );
    for (const id of active) {
      const keys = rows.filter((row) => Number(row.connection_id) === id);
      expect(keys.at(-1).expires_in).toBeNull();
      for (const older of keys.slice(0, -1))
        expect(older.expires_in !== null && (older.expires_in <= 0 || older.expires_in > 23 * 3600)).toBe(true);
    }
  });

  it('`menu-sync subscribe` with a malformed id exits 2, with an unknown one 1', async () => {
    expect((await cli(['subscribe', '--connection', 'abc'])).code).toBe(2);
    const unknown = await cli(['subscribe', '--connection', '999']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no connection 999');
  });
});

describe('the out-of-band flow of the CLI', () => {
  it('`auth url` → the code page → `auth exchange <code>` stores a connection and subscribes it', async () => {
    const countBefore = (await connections()).length;
    // An owner not known at the exchange: a connection of its own (see the refused subscription above).
    await control(emulator, 'POST', '/_emulator/faults', { token_info_status: 404 });
    const url = await cli(['auth', 'url']);
    expect(url.code).toBe(0);
    const authorizeUrl = /^http\S+\/oauth\/authorize\?\S+$/m.exec(url.stdout)?.[0];
    expect(authorizeUrl).toBeDefined();
    expect(new URL(authorizeUrl!).searchParams.get('redirect_uri')).toBe(OOB);
    expect(authorizeUrl).toContain(`scope=${DEFAULT_SCOPES}`);
    const page = await get(authorizeUrl!);
    expect(page.status).toBe(200);
    const code = /<code id="code">([^<]+)<\/code>/.exec(page.text)?.[1];
    expect(code).toBeDefined();

    const exchange = await cli(['auth', 'exchange', code!]);
    await control(emulator, 'POST', '/_emulator/faults', {});
    expect(exchange.code).toBe(0);
    const connection = printed(exchange).data;
    expect(connection).toMatchObject({
      state: 'active',
      subscriptions: [expect.objectContaining({ status: 'registered' })],
    });
    const listed = await connections();
    expect(listed.length).toBe(countBefore + 1);
    expect(listed.at(-1)).toMatchObject({ id: connection.id, state: 'active' });

    // The pending request was spent: the same code cannot be exchanged twice.
    const again = await cli(['auth', 'exchange', code!]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('auth url');
    expect((await connections()).length).toBe(countBefore + 1);
  });

  it('`auth` without a subcommand, `auth exchange` without a code, and no upstream configured exit 2', async () => {
    expect((await cli(['auth'])).code).toBe(2);
    expect((await cli(['auth', 'exchange'])).code).toBe(2);
    // Without an upstream there is nothing to connect to: a configuration error.
    const env = { ...daemon.process.env };
    for (const name of [
      'PATH',
      'HOME',
      'UPSTREAM_AUTH_URL',
      'UPSTREAM_BASE_URL',
      'OAUTH_CLIENT_ID',
      'OAUTH_CLIENT_SECRET',
    ])
      delete env[name];
    const unconfigured = await runCli(['auth', 'url'], env, daemon.process.cwd);
    expect(unconfigured.code).toBe(2);
    expect(unconfigured.stderr).toContain('No upstream is configured');
    // A code may start with `-` (base64url): it is taken as the code, not as an option.
    const dashed = await cli(['auth', 'exchange', '-hNoPendingRequest']);
    expect(dashed.code).toBe(1);
    expect(dashed.stderr).toContain('No unexpired out-of-band authorization is pending');
  });
});

describe('tokens at expiry, two processes (docs/reference.md §6)', () => {
  it('20 concurrent upstream calls from two processes on an expired token cause exactly one refresh grant', async () => {
    const [connection] = await connections();
    // The token is due (issued 7 h ago, lifetime 6 h) and no longer works upstream either.
    await db.query(`UPDATE connections SET token_created_at = now() - interval '7 hours' WHERE id = $1`, [
      connection.id,
    ]);
    expect((await call(emulator, '/_emulator/tokens/expire', { method: 'POST' })).status).toBe(200);
    const grantsBefore = (await call(emulator, '/_emulator/token_requests')).json.data.length;

    const args = ['auth', 'check', '--connection', String(connection.id), '--calls', '10'];
    const [first, second] = await Promise.all([cli(args), cli(args)]);
    for (const result of [first, second]) {
      expect({ code: result.code, run: result.code === 0 ? '' : describeRun(result) }).toEqual({ code: 0, run: '' });
      expect(printed(result).data).toEqual(
        Array.from({ length: 10 }, () => ({ connection_id: connection.id, status: 200 })),
      );
    }
    const grants = (await call(emulator, '/_emulator/token_requests')).json.data.slice(grantsBefore);
    expect(grants.map((grant: { grant_type: string; status: number }) => [grant.grant_type, grant.status])).toEqual([
      ['refresh_token', 200],
    ]);
    const [after] = await connections();
    expect(after).toMatchObject({ state: 'active', token: { last_refresh_at: expect.any(String) } });
    expect(Date.parse(after.token.expires_at)).toBeGreaterThan(Date.now() + 5 * 3600_000);
  });

  it('a token the upstream stops honouring before its expiry is refreshed once on the 401, and the call retried', async () => {
    const [connection] = await connections();
    expect((await call(emulator, '/_emulator/tokens/expire', { method: 'POST' })).status).toBe(200);
    const grantsBefore = (await call(emulator, '/_emulator/token_requests')).json.data.length;
    const result = await cli(['auth', 'check', '--connection', String(connection.id), '--calls', '5']);
    expect({ code: result.code, run: result.code === 0 ? '' : describeRun(result) }).toEqual({ code: 0, run: '' });
    expect(printed(result).data).toEqual(
      Array.from({ length: 5 }, () => ({ connection_id: connection.id, status: 200 })),
    );
    const grants = (await call(emulator, '/_emulator/token_requests')).json.data.slice(grantsBefore);
    expect(grants.map((grant: { grant_type: string; status: number }) => [grant.grant_type, grant.status])).toEqual([
      ['refresh_token', 200],
    ]);
  });
});

describe('secrets at rest and in logs', () => {
  it("no token and no webhook key is in a pg_dump of the database (the deliveries' uri included), in any log or CLI output", async () => {
    const dump = await new Promise<string>((resolve, reject) => {
      execFile(
        PG_DUMP,
        ['--no-owner', '--data-only', daemon.database.url],
        { maxBuffer: 256 * 1024 * 1024 },
        (error, stdout) => {
          if (error) reject(error);
          else resolve(stdout);
        },
      );
    });
    expect(dump).toContain('COPY public.connections');
    expect(dump).toContain(publicUrl);
    const tokens = issued
      .flatMap((answer) => [answer.access_token, answer.refresh_token])
      .filter((token): token is string => token !== undefined);
    const keys = (await endpoints()).map((endpoint) => endpoint.callback_uri.split('/webhooks/')[1]);
    expect(tokens.length).toBeGreaterThanOrEqual(6);
    expect(keys.length).toBeGreaterThanOrEqual(3);
    const logs = [daemon.process.logs, ...cliOutput].join('\n');
    // Deliveries carry their callback URI (`data.attributes.uri`): the log stores them with the key
    // redacted and the exact bytes sealed, so the key appears nowhere in clear.
    // The log's rows are in its partitions (event_log_0 holds the first million positions).
    expect(dump).toMatch(/COPY public\.event_log_0 [\s\S]*\[redacted\]/);
    for (const secret of [...tokens, ...keys]) {
      expect(dump).not.toContain(secret);
      // bytea columns are dumped in hex.
      expect(dump).not.toContain(Buffer.from(secret).toString('hex'));
      expect(logs).not.toContain(secret);
    }
    for (const token of tokens) expect(dump).not.toContain(token);
  });
});

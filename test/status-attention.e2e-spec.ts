import { randomBytes } from 'node:crypto';
import type { Page } from 'playwright-core';
import { Browser, launchBrowser } from './support/browser.js';
import { SecretCipher } from '../src/common/secret-cipher.js';
import { ConnectionRepository } from '../src/connections/connection.repository.js';
import { insertChanges, sqlQuery } from './support/change-log-factory.js';
import { openDataSource } from './support/database.js';
import { describeRun, runCli } from './support/cli.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, LOOPBACK_NETWORKS, RunningDaemon, startDaemon } from './support/http.js';
import { SinkReceiver } from './support/sink-receiver.js';

/**
 * Issue 41, item 1: `menu-sync status`, `GET /api/v1/status` and the console agree on what needs
 * attention, and say it early: a table sink into a database that does not exist within
 * SINK_ATTENTION_AFTER (2 s here), a sink that delivered before once it has failed that long, and
 * no connected account at all.
 */

const ATTENTION_AFTER_MS = 2000;
type Json = any;

const NO_ACCOUNT = 'no account connected: connect one at /auth/connect or with `menu-sync auth url`';

describe('status and the console agree on what needs attention', () => {
  let app: RunningDaemon;
  let env: Record<string, string>;
  let browser: Browser;
  let page: Page;
  const receiver = new SinkReceiver();

  /** The CLI's report read from the database, and the daemon's from GET /api/v1/status, without their instants. */
  const reports = async () => {
    const cli = await runCli(['status', '--json'], env);
    const served = await api(app.url, '/api/v1/status');
    expect(served.status).toBe(200);
    const { at: cliAt, ...fromCli } = JSON.parse(cli.stdout);
    const { at: servedAt, ...fromApi } = served.json;
    expect([typeof cliAt, typeof servedAt]).toEqual(['string', 'string']);
    return { cli, fromCli, fromApi };
  };

  const consoleAttention = async () => {
    const section = page.locator('#attention');
    await section.waitFor();
    return section.textContent();
  };

  beforeAll(async () => {
    await receiver.start();
    // No WEBHOOK_KEYS and no connection: nothing can arrive, which status must say.
    app = await startDaemon({
      WEBHOOK_KEYS: '',
      SINK_ATTENTION_AFTER: `${ATTENTION_AFTER_MS / 1000}s`,
      SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
      LOG_LEVEL: 'warn',
    });
    env = { ...app.process.env, LOG_LEVEL: 'warn' };
    browser = await launchBrowser();
    page = await browser.context.newPage();
    await page.goto(`${app.url}/console/`);
    await page.getByPlaceholder('API token').fill(API_TOKEN);
    await page.getByRole('button', { name: 'Open the console' }).click();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await receiver.close();
  });

  it('no connected account: exit 1, the same report from the API, and the console says it in the same words', async () => {
    const { cli, fromCli, fromApi } = await reports();
    expect({ code: cli.code, attention: fromCli.attention, counts: fromCli.counts }).toEqual({
      code: 1,
      attention: [NO_ACCOUNT],
      counts: { connections: 1, projections: 0, sinks: 0, reconcile: 0 },
    });
    expect(fromApi).toEqual(fromCli);
    expect(cli.stderr).toBe('');
    await eventually(async () => expect(await consoleAttention()).toBe(`1 thing(s) need attention${NO_ACCOUNT}`));
    const stat = page.locator('.stat', { hasText: 'Connections' });
    await expect(stat.getAttribute('class')).resolves.toBe('stat bad');
    await expect(stat.locator('.hint').textContent()).resolves.toBe('none connected');

    const screen = await runCli(['status'], env);
    expect(screen.code).toBe(1);
    expect(screen.stdout).toContain(`1 thing(s) need attention:\n  ✗ ${NO_ACCOUNT}\n`);
  }, 120_000);

  it('a table sink into a database that does not exist needs attention within SINK_ATTENTION_AFTER, in status, the API and the console', async () => {
    await insertChanges(app.database.url, [{ type: 'product', id: '1' }]);
    const missing = `menu_sync_missing_${randomBytes(4).toString('hex')}`;
    const created = await api(app.url, '/api/v1/sinks', API_TOKEN, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'postgres', url: `postgres://postgres@127.0.0.1:5432/${missing}`, from: 'start' }),
    });
    expect(created.status).toBe(201);
    const id = created.json.data.id;
    const since = Date.now();
    const flagged = await eventually(
      async () => {
        const served = (await api(app.url, '/api/v1/status')).json;
        expect(served.counts.sinks).toBe(1);
        return served;
      },
      ATTENTION_AFTER_MS,
      50,
    );
    expect(Date.now() - since).toBeLessThan(ATTENTION_AFTER_MS + 1000);
    const view = (await api(app.url, `/api/v1/sinks/${id}`)).json.data;
    expect([view.state, view.last_success_at]).toEqual(['retrying', null]);
    expect(view.last_error).toMatch(/3D000/);
    const reason = `sink ${id} retrying, never delivered, failing since ${view.failing_since}: ${view.last_error}`;
    expect(flagged.sinks.needing_attention).toEqual([
      {
        id,
        kind: 'postgres',
        state: 'retrying',
        failing_since: view.failing_since,
        last_success_at: null,
        last_error: view.last_error,
      },
    ]);

    const { cli, fromCli, fromApi } = await reports();
    expect({ code: cli.code, attention: fromCli.attention }).toEqual({ code: 1, attention: [NO_ACCOUNT, reason] });
    expect(fromApi).toEqual(fromCli);
    await eventually(async () =>
      expect(await consoleAttention()).toBe(`2 thing(s) need attention${NO_ACCOUNT}${reason}`),
    );
    const stat = page.locator('.stat', { hasText: 'Sinks' });
    await expect(stat.getAttribute('class')).resolves.toBe('stat bad');
    await expect(stat.locator('.hint').textContent()).resolves.toBe('1 need attention');
    expect((await api(app.url, `/api/v1/sinks/${id}`, API_TOKEN, { method: 'DELETE' })).status).toBe(204);
  }, 120_000);

  it('a sink that delivered before needs attention only once it has failed for SINK_ATTENTION_AFTER', async () => {
    const created = await api(app.url, '/api/v1/sinks', API_TOKEN, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'http', url: receiver.url, from: 'start' }),
    });
    expect(created.status).toBe(201);
    const id = created.json.data.id;
    receiver.secrets = [created.json.data.secret];
    await eventually(async () =>
      expect((await api(app.url, `/api/v1/sinks/${id}`)).json.data.last_success_at).not.toBeNull(),
    );
    receiver.always = { status: 503 };
    await insertChanges(app.database.url, [{ type: 'product', id: '2' }]);
    const failing = await eventually(async () => {
      const view = (await api(app.url, `/api/v1/sinks/${id}`)).json.data;
      expect(view.state).toBe('retrying');
      return view;
    });
    const since = Date.parse(failing.failing_since);
    // Read while the failures are younger than SINK_ATTENTION_AFTER: a blip, not yet a fault.
    const early = (await api(app.url, '/api/v1/status')).json;
    expect(Date.now() - since).toBeLessThan(ATTENTION_AFTER_MS);
    expect([early.counts.sinks, early.attention]).toEqual([0, [NO_ACCOUNT]]);
    await eventually(
      async () => expect((await api(app.url, '/api/v1/status')).json.counts.sinks).toBe(1),
      ATTENTION_AFTER_MS + 5000,
      50,
    );
    expect(Date.now() - since).toBeGreaterThanOrEqual(ATTENTION_AFTER_MS);
    const late = await reports();
    const view = (await api(app.url, `/api/v1/sinks/${id}`)).json.data;
    expect({ code: late.cli.code, run: describeRun(late.cli) }).toMatchObject({ code: 1 });
    expect(late.fromCli.attention[1]).toMatch(new RegExp(`^sink ${id} retrying, failing since ${view.failing_since}`));
    expect(late.fromApi.attention).toEqual(late.fromCli.attention);
    receiver.always = undefined;
    expect((await api(app.url, `/api/v1/sinks/${id}`, API_TOKEN, { method: 'DELETE' })).status).toBe(204);
  }, 120_000);

  it('a retired sandbox connection needs nothing and a subscription not registered does, the same in status, the API and the console', async () => {
    const [retired] = await sqlQuery(
      app.database.url,
      `INSERT INTO connections (auth_url, base_url, scopes, state, access_token, token_created_at, expires_in, owner_id, sandbox, last_error)
       VALUES ('http://127.0.0.1:1', 'http://127.0.0.1:1', '{read_menu}', 'reauthorization_required', '\\x00', now(), 7200, '4001', true,
               'its sandbox emulator has stopped') RETURNING id::int AS id`,
    );
    // Through the repository, with the daemon's key: a connection whose tokens open stays active.
    const dataSource = await openDataSource(app.database.url, 1);
    const connected = await new ConnectionRepository(
      dataSource,
      SecretCipher.fromKey(Buffer.from(app.process.env.TOKEN_ENCRYPTION_KEY, 'base64')),
    )
      .create({
        authUrl: 'http://127.0.0.1:2',
        baseUrl: 'http://127.0.0.1:2',
        scopes: ['read_menu'],
        tokens: { accessToken: 'a', refreshToken: null, createdAt: new Date(), expiresIn: 86400, ownerId: '4002' },
      })
      .finally(() => dataSource.destroy());
    const [subscription] = await sqlQuery(
      app.database.url,
      `INSERT INTO subscriptions (connection_id, callback_uri, enabled_events, status, last_error)
       VALUES ($1, 'http://127.0.0.1/webhooks/[redacted]', '{product.created}', 'failed', 'the upstream answered 422')
       RETURNING id::int AS id`,
      [connected.id],
    );
    const reason = `connection ${connected.id}: webhook subscription ${subscription.id} is failed (the upstream answered 422)`;
    const { cli, fromCli, fromApi } = await reports();
    expect({ code: cli.code, attention: fromCli.attention, counts: fromCli.counts }).toEqual({
      code: 1,
      attention: [reason],
      counts: { connections: 1, projections: 0, sinks: 0, reconcile: 0 },
    });
    expect(fromApi).toEqual(fromCli);
    expect(fromCli.connections.map((c: Json) => [c.id, c.retired, c.attention])).toEqual([
      [retired.id, true, false],
      [connected.id, false, true],
    ]);
    await eventually(async () => expect(await consoleAttention()).toBe(`1 thing(s) need attention${reason}`));
    const stat = page.locator('.stat', { hasText: 'Connections' });
    await expect(stat.locator('.hint').textContent()).resolves.toBe('1 need attention');
    const rows = page.locator('#connections tbody tr');
    await expect(rows.nth(0).locator('td').nth(1).textContent()).resolves.toBe('retired (sandbox)');
    await expect(rows.nth(1).locator('td').nth(1).textContent()).resolves.toBe('active');
    const screen = await runCli(['status'], env);
    expect(screen.stdout).toContain(`  #${retired.id}  retired (sandbox)  owner 4001`);
  }, 120_000);

  it('GET /api/v1/status takes a read token, and refuses one scoped to owners', async () => {
    const made = async (body: Json) => {
      const answer = await api(app.url, '/api/v1/tokens', API_TOKEN, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(answer.status).toBe(201);
      return answer.json.token;
    };
    const reader = await made({ name: 'status reader', role: 'read' });
    const scoped = await made({ name: 'one store', role: 'read', owner_ids: ['4001'] });
    await eventually(async () => expect((await api(app.url, '/api/v1/status', reader)).status).toBe(200));
    await eventually(async () => expect((await api(app.url, '/api/v1/status', scoped)).status).toBe(403));
  }, 60_000);
});

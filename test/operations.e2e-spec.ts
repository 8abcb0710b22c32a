import { DaemonProcess } from './support/daemon-process.js';
import { runCli, spawnCli } from './support/cli.js';
import { eventually } from './support/eventually.js';
import { api, deliver, RunningDaemon, scrape, startDaemon } from './support/http.js';
import { at, menuEvent, product } from './support/menu-events.js';
import pg from 'pg';

/**
 * Issue 15's operations: `menu-sync status` (one screen, exit 0 / 1 when something needs
 * attention / 2 on bad usage), the read endpoints the console uses (owners with their span, the
 * parked events), the connection-state gauge, / leading to the console, and LOG_FORMAT.
 * The daemon first runs without its projector, so lag can be made and watched, then with it.
 */

type Json = any;

/** The six characters \u0000 as a JSON escape: valid JSON that jsonb refuses, so the projector parks the event. */
const poisoned = (event: Json) => JSON.stringify(event).replace('"NOTE"', '"a\\u0000b"');

describe("operations: menu-sync status, the console's endpoints, LOG_FORMAT", () => {
  let app: RunningDaemon;
  let daemon: DaemonProcess;
  let cliEnv: Record<string, string>;
  let db: pg.Client;
  const status = async (args: string[] = [], env: Record<string, string> = {}) =>
    runCli(['status', '--interval-ms', '300', ...args], { ...cliEnv, ...env });
  const statusJson = async (args: string[] = []) => {
    const result = await status(['--json', ...args]);
    return { result, json: JSON.parse(result.stdout) };
  };

  beforeAll(async () => {
    app = await startDaemon({ PROJECTOR_ENABLED: 'false', LOG_LEVEL: 'info' });
    daemon = app.process;
    // With WEBHOOK_KEYS, as the daemon has them: webhooks arrive without a connection (else status says none is connected).
    cliEnv = { DATABASE_URL: app.database.url, WEBHOOK_KEYS: app.process.env.WEBHOOK_KEYS };
    db = new pg.Client({ connectionString: app.database.url });
    await db.connect();
  }, 120_000);

  afterAll(async () => {
    await db?.end();
    daemon?.kill('SIGKILL');
    await app?.close();
  });

  it('exits 0 on a fresh database, on one screen and as JSON', async () => {
    const screen = await status();
    expect({ code: screen.code, out: screen.stdout }).toEqual({
      code: 0,
      out: expect.stringContaining('OK: nothing needs attention'),
    });
    expect(screen.stdout).toMatch(/Connections\n {2}none/);
    expect(screen.stdout).toMatch(/Sinks\n {2}none/);
    const { result, json } = await statusJson();
    expect(result.code).toBe(0);
    expect(json).toMatchObject({
      ok: true,
      attention: [],
      connections: [],
      quarantined: 0,
      last_reconcile: null,
      projections: [
        expect.objectContaining({ name: 'menu', lag: 0, parked: 0 }),
        expect.objectContaining({ name: 'orders', lag: 0 }),
      ],
    });
  }, 180_000);

  it('exits 2 on bad usage and bad configuration', async () => {
    for (const [args, env] of [
      [['--lag-threshold', 'lots'], {}],
      [['surplus'], {}],
      [[], { LOG_FORMAT: 'yaml' }],
    ] as const) {
      const result = await status([...args], env);
      expect({ args, code: result.code }).toEqual({ args, code: 2 });
    }
  }, 180_000);

  it('lag: under the threshold and standing still is fine; over the threshold, or growing while the projector stands, exits 1', async () => {
    for (let i = 0; i < 3; i++)
      expect(
        (await deliver(app.url, menuEvent('created', product(`5${i}`), { at: at(i), ownerId: 'lagging' }))).status,
      ).toBe(202);
    const still = await statusJson();
    expect(still.json.projections.find((p: Json) => p.name === 'menu').lag).toBe(3);
    expect({ code: still.result.code, attention: still.json.attention }).toEqual({ code: 0, attention: [] });

    const over = await statusJson(['--lag-threshold', '3']);
    expect(over.result.code).toBe(1);
    expect(over.json.attention).toEqual(
      expect.arrayContaining([expect.stringMatching(/^projection menu: lag 3 events \(threshold 3\)/)]),
    );

    // Deliveries keep coming during the two samples; nothing applies them.
    const watching = spawnCli(['status', '--json', '--interval-ms', '2500'], cliEnv);
    let sent = 0;
    while (watching.running && sent < 200) {
      await deliver(app.url, menuEvent('created', product(`6${sent}`), { at: at(10 + sent), ownerId: 'lagging' }));
      sent++;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const growing = await watching.wait();
    expect(growing.code).toBe(1);
    expect(JSON.parse(growing.stdout).attention).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^projection menu: lag growing \(\d+ → \d+\) and the projector is not moving/),
      ]),
    );
  }, 180_000);

  it('with the projector back: caught up exits 0; a parked event exits 1 and is listed with its error', async () => {
    daemon.kill('SIGTERM');
    await daemon.waitForExit(15000);
    daemon = await DaemonProcess.start({ cwd: daemon.cwd, env: { ...daemon.env, PROJECTOR_ENABLED: 'true' } });
    await eventually(
      async () => {
        const { json } = await statusJson();
        expect(json.projections.map((p: Json) => p.lag)).toEqual([0, 0]);
      },
      30000,
      200,
    );
    expect((await status()).code).toBe(0);
    const parkedBefore = await api(daemon.url, '/api/v1/projections/parked');
    expect(parkedBefore.json).toEqual({ data: [] });

    const answer = await deliver(
      daemon.url,
      poisoned(menuEvent('created', product('19001', { extra: { note: 'NOTE' } }), { at: at(500), ownerId: 'poison' })),
    );
    expect(answer.status).toBe(202);
    const parked = await eventually(
      async () => {
        const listed = (await api(daemon.url, '/api/v1/projections/parked')).json.data;
        expect(listed).toHaveLength(1);
        return listed[0];
      },
      15000,
      100,
    );
    expect(parked).toEqual({
      projection: 'menu',
      position: answer.json.position,
      event_id: answer.json.event_id,
      error: expect.any(String),
      parked_at: expect.any(String),
    });
    expect(parked.error.length).toBeGreaterThan(0);

    const { result, json } = await statusJson();
    expect(result.code).toBe(1);
    expect(json.attention).toEqual([expect.stringMatching(/^projection menu: 1 parked event\(s\)/)]);
    const screen = await status();
    expect(screen.code).toBe(1);
    expect(screen.stdout).toContain('1 thing(s) need attention');
  }, 180_000);

  it('a connection needing reauthorization exits 1, and is counted by menu_sync_connections{state}', async () => {
    expect(await scrape(daemon.url, 'menu_sync_connections', { state: 'reauthorization_required' })).toBe(0);
    await db.query(`INSERT INTO connections (auth_url, base_url, scopes, state, access_token, token_created_at, expires_in, owner_id, last_error)
                    VALUES ('https://auth.example', 'https://api.example', '{read_menu}', 'reauthorization_required', '\\x00', now(), 7200, '77', 'invalid_grant')`);
    const { result, json } = await statusJson();
    expect(result.code).toBe(1);
    expect(json.attention).toEqual(
      expect.arrayContaining([expect.stringMatching(/^connection \d+ needs reauthorization: invalid_grant/)]),
    );
    expect(await scrape(daemon.url, 'menu_sync_connections', { state: 'reauthorization_required' })).toBe(1);
    expect(await scrape(daemon.url, 'menu_sync_connections', { state: 'active' })).toBe(0);
  }, 180_000);

  it("GET /api/v1/owners: each owner of the log with its events' span; it takes the API token", async () => {
    const answer = await api(daemon.url, '/api/v1/owners');
    expect(answer.status).toBe(200);
    const lagging = answer.json.data.find((owner: Json) => owner.owner_id === 'lagging');
    expect(lagging).toMatchObject({ first_occurred_at: at(0), events: expect.any(Number) });
    expect(lagging.events).toBeGreaterThan(3);
    expect(Date.parse(lagging.last_occurred_at)).toBeGreaterThan(Date.parse(at(10)));
    expect(answer.json.data.find((owner: Json) => owner.owner_id === 'poison')).toEqual({
      owner_id: 'poison',
      events: 1,
      first_occurred_at: at(500),
      last_occurred_at: at(500),
    });
    expect((await api(daemon.url, '/api/v1/owners', null)).status).toBe(401);
  }, 180_000);

  it('serves the console at /console/ and sends / and /console there', async () => {
    const root = await fetch(`${daemon.url}/`, { redirect: 'manual' });
    expect([root.status, root.headers.get('location')]).toEqual([302, '/console/']);
    const bare = await fetch(`${daemon.url}/console`, { redirect: 'manual' });
    expect([bare.status, bare.headers.get('location')]).toEqual([302, '/console/']);
    const withQuery = await fetch(`${daemon.url}/console?owner=42&at=2024-05-01T10%3A00%3A00Z`, { redirect: 'manual' });
    expect([withQuery.status, withQuery.headers.get('location')]).toEqual([
      302,
      '/console/?owner=42&at=2024-05-01T10%3A00%3A00Z',
    ]);
    const followed = await fetch(`${daemon.url}/console`);
    expect([followed.status, followed.url, followed.headers.get('content-type')]).toEqual([
      200,
      `${daemon.url}/console/`,
      expect.stringMatching(/^text\/html/),
    ]);
    const page = await fetch(`${daemon.url}/console/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    expect((await fetch(`${daemon.url}${script}`)).status).toBe(200);
  }, 180_000);

  it('LOG_FORMAT: JSON lines when the output is not a terminal, pino-pretty lines with pretty', async () => {
    const auto = await runCli(['migrate'], cliEnv);
    expect(auto.code).toBe(0);
    const autoLines = auto.stderr
      .trim()
      .split('\n')
      .filter((line) => line !== '');
    expect(autoLines.length).toBeGreaterThan(0);
    for (const line of autoLines) expect(() => JSON.parse(line)).not.toThrow();
    const pretty = await runCli(['migrate'], { ...cliEnv, LOG_FORMAT: 'pretty' });
    expect(pretty.code).toBe(0);
    expect(pretty.stderr).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \[MigrateCommand\] no pending migrations$/m);
    expect(() => JSON.parse(pretty.stderr.split('\n')[0])).toThrow();
  }, 180_000);
});

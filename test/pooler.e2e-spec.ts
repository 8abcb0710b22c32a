import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { changesAfter } from './support/changes.js';
import { describeRun, runCli } from './support/cli.js';
import { DaemonProcess, sleep, daemonEnv } from './support/daemon-process.js';
import { createTestDatabase, TestDatabase } from './support/database.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, deliver, LOOPBACK_NETWORKS, WEBHOOK_KEY } from './support/http.js';
import { menuEvent, product } from './support/menu-events.js';
import { poolerBackends, poolerClients, pooledUrl } from './support/pooler.js';
import { SinkReceiver } from './support/sink-receiver.js';
import { apiVersusFold, projections } from './faults/load.js';

const PRODUCTS = 12;
const OWNER = '4401';

/**
 * Issue 44 (docs/reference.md, Behind a pooler): DATABASE_URL on PgBouncer in transaction mode
 * (test/services.sh, 127.0.0.1:6432), DATABASE_DIRECT_URL on PostgreSQL itself. Two built daemons:
 * exactly one projects and its lock is held on a direct session; webhooks to both are appended
 * (every one, not only the first: named statements are off on the pooled URL), projected, in the
 * feed, delivered to an HTTP sink, and a replay leaves the API equal to the fold of the log. A direct
 * URL that is pooled stops the start with exit code 2, naming DATABASE_DIRECT_URL, and
 * /health/ready answers 503 while an append fails.
 */
describe('behind a transaction pooler: DATABASE_URL on PgBouncer, DATABASE_DIRECT_URL direct (built daemons)', () => {
  let database: TestDatabase;
  let dir: string;
  let client: pg.Client;
  let env: Record<string, string>;
  const daemons: DaemonProcess[] = [];
  const receiver = new SinkReceiver();

  beforeAll(async () => {
    database = await createTestDatabase();
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-pooler-'));
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    await receiver.start();
    env = daemonEnv({
      DATABASE_URL: pooledUrl(database.url),
      DATABASE_DIRECT_URL: database.url,
      DATA_DIR: dir,
      WEBHOOK_KEYS: WEBHOOK_KEY,
      API_TOKENS: API_TOKEN,
      SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
    });
  }, 120_000);

  afterAll(async () => {
    await DaemonProcess.killAll();
    await receiver.close();
    await client?.end();
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it.each([
    [
      'DATABASE_DIRECT_URL on the pooler',
      { DATABASE_DIRECT_URL: 'pooled' },
      /DATABASE_DIRECT_URL goes through a transaction-mode pooler/,
    ],
    [
      'DATABASE_URL on the pooler, no DATABASE_DIRECT_URL',
      { DATABASE_DIRECT_URL: '' },
      /set DATABASE_DIRECT_URL to the database itself/,
    ],
  ])(
    '%s: the start is refused with exit code 2, naming DATABASE_DIRECT_URL',
    async (_name, change, message) => {
      const refused = await DaemonProcess.spawn({
        cwd: dir,
        env: { ...env, DATABASE_DIRECT_URL: change.DATABASE_DIRECT_URL === 'pooled' ? pooledUrl(database.url) : '' },
      });
      expect(await refused.waitForExit(60_000)).toEqual({ code: 2, signal: null });
      expect(refused.stderr).toMatch(message);
      // Refused before the migrations and the HTTP listener: nothing was applied through it.
      expect(refused.logs).not.toMatch(/listening on/);
    },
    90_000,
  );

  it('two daemons behind the pooler: exactly one projects, on a direct session; the other stands by', async () => {
    daemons.push(await DaemonProcess.start({ cwd: dir, env, readyTimeoutMs: 120_000 }));
    daemons.push(await DaemonProcess.start({ cwd: dir, env, readyTimeoutMs: 120_000 }));
    let states: string[] = [];
    for (const deadline = Date.now() + 20_000; Date.now() < deadline; await sleep(100)) {
      states = await Promise.all(daemons.map(async (daemon) => (await projections(daemon.url, API_TOKEN))[0].state));
      if (states.includes('running') && states.includes('standby')) break;
    }
    expect(states.sort()).toEqual(['running', 'standby']);
    // Sampled for 3 s more: never both.
    for (const until = Date.now() + 3000; Date.now() < until; await sleep(100)) {
      const now = await Promise.all(daemons.map(async (daemon) => (await projections(daemon.url, API_TOKEN))[0].state));
      expect(now.filter((state) => state === 'running')).toHaveLength(1);
    }
    const holders = await client.query<{ pid: number }>(
      `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = 7260002 AND objsubid = 1 AND granted
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    expect(holders.rows).toHaveLength(1);
    const pooled = await poolerBackends(database.name);
    expect(pooled.has(holders.rows[0].pid)).toBe(false);
    // Both daemons' pools are clients of the pooler.
    expect(await poolerClients(database.name)).toBeGreaterThanOrEqual(2);
  }, 300_000);

  it('ingress, projection, the feed, an HTTP sink and a replay work through the pooler', async () => {
    const created = await api(daemons[0].url, '/api/v1/sinks', API_TOKEN, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'http', url: receiver.url, from: 'start', owner_ids: [OWNER] }),
    });
    expect(created.status).toBe(201);
    receiver.secrets = [created.json.data.secret];

    const statuses: number[] = [];
    for (let n = 0; n < PRODUCTS * 2; n++) {
      const id = String(1 + (n % PRODUCTS));
      const event = menuEvent(n < PRODUCTS ? 'created' : 'updated', product(id, { title: `Product ${id} r${n}` }), {
        at: new Date(Date.parse('2024-05-01T10:00:00.000Z') + n * 1000),
        ownerId: OWNER,
        eventId: `pooler-${n}`,
        seq: 100 + n,
      });
      statuses.push((await deliver(daemons[n % 2].url, event)).status);
    }
    expect(statuses).toEqual(Array(PRODUCTS * 2).fill(202));
    expect((await client.query('SELECT count(*)::int AS n FROM event_log')).rows).toEqual([{ n: PRODUCTS * 2 }]);

    // Projection: both daemons answer the fold of the log.
    for (const daemon of daemons) {
      await eventually(
        async () => {
          const { problems, resources } = await apiVersusFold(daemon.url, API_TOKEN, client, { product: 'products' });
          expect(problems).toEqual([]);
          expect(resources).toBe(PRODUCTS);
        },
        30_000,
        200,
      );
    }
    const titles = async (url: string) =>
      Object.fromEntries(
        (await api(url, `/api/v1/products?limit=100`)).json.data.map(
          (p: { id: string; attributes: { title: string } }) => [p.id, p.attributes.title],
        ),
      );
    const expected = Object.fromEntries(
      Array.from({ length: PRODUCTS }, (_, i) => [String(i + 1), `Product ${i + 1} r${PRODUCTS + i}`]),
    );
    expect(await titles(daemons[1].url)).toEqual(expected);

    // The feed: the newest change of each product says so.
    const { changes } = await changesAfter(daemons[1].url);
    const newest = new Map<string, string>();
    for (const change of changes) newest.set(change.id, change.resource.attributes.title);
    expect(Object.fromEntries(newest)).toEqual(expected);

    // The sink: the receiver converges on the same.
    await eventually(
      async () => {
        const delivered = Object.fromEntries(
          [...receiver.catalogue.values()].map((change) => [change.id, change.resource.attributes.title]),
        );
        expect(delivered).toEqual(expected);
      },
      30_000,
      200,
    );

    // A replay through the same settings (its locks on the direct URL), then the API equals the fold again.
    const replayed = await runCli(['replay', '--projection', 'menu'], env, dir, 180_000);
    expect({ code: replayed.code, run: describeRun(replayed) }).toMatchObject({ code: 0 });
    expect(await titles(daemons[0].url)).toEqual(expected);
    const { problems } = await apiVersusFold(daemons[0].url, API_TOKEN, client, { product: 'products' });
    expect(problems).toEqual([]);
  }, 300_000);

  it('/health/ready answers 503 while an append fails, 200 once appends work again', async () => {
    const ready = async () => (await api(daemons[0].url, '/health/ready', null)).status;
    expect(await ready()).toBe(200);
    await client.query(`CREATE FUNCTION pooler_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'appends refused by the test'; END $$`);
    await client.query(`CREATE TRIGGER pooler_test_refuse BEFORE INSERT ON event_log
      FOR EACH STATEMENT EXECUTE FUNCTION pooler_test_refuse()`);
    try {
      expect(await ready()).toBe(503);
      const answer = await deliver(
        daemons[0].url,
        menuEvent('updated', product('1'), {
          at: '2024-05-02T10:00:00.000Z',
          ownerId: OWNER,
          eventId: 'pooler-refused',
        }),
      );
      expect(answer.status).toBe(503);
    } finally {
      await client.query('DROP TRIGGER pooler_test_refuse ON event_log');
      await client.query('DROP FUNCTION pooler_test_refuse()');
    }
    expect(await ready()).toBe(200);
  }, 60_000);
  it('the active projector killed (SIGKILL): the standby takes over, its lock again on a direct session', async () => {
    const states = await Promise.all(
      daemons.map(async (daemon) => (await projections(daemon.url, API_TOKEN))[0].state),
    );
    expect(states.slice().sort()).toEqual(['running', 'standby']);
    const active = daemons[states.indexOf('running')];
    const standby = daemons[states.indexOf('standby')];
    active.kill('SIGKILL');
    expect(await active.waitForExit(5000)).toEqual({ code: null, signal: 'SIGKILL' });
    await eventually(
      async () => expect((await projections(standby.url, API_TOKEN))[0].state).toBe('running'),
      15_000,
      100,
    );
    const holders = await client.query<{ pid: number }>(
      `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = 7260002 AND objsubid = 1 AND granted
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    expect(holders.rows).toHaveLength(1);
    expect((await poolerBackends(database.name)).has(holders.rows[0].pid)).toBe(false);
  }, 60_000);
});

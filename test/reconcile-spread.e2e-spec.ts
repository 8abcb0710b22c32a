import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startFakePlatform } from '../bench/lib/fake-platform.js';
import type { FakePlatform } from '../bench/lib/fake-platform.js';
import { LOCK_SPACES } from '../src/database/advisory-locks.js';
import { RECONCILE_BUCKETS, storeBucket } from '../src/reconcile/reconcile-schedule.js';
import { describeRun, runCli } from './support/cli.js';
import { connect } from './support/connect.js';
import { DaemonProcess, freePort } from './support/daemon-process.js';
import { createTestDatabase, TestDatabase } from './support/database.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, WEBHOOK_KEY } from './support/http.js';
import { pooledUrl } from './support/pooler.js';
import type { Json } from './support/menu-events.js';

/**
 * The spread schedule shared by processes (docs/reference.md §13, issue 42): two `serve` processes
 * with the `reconcile` role on one database, RECONCILE_CRON unset, share the 64 store buckets 32
 * and 32; two users of 12 stores each are connected, and their stores go first. One process is
 * killed with SIGKILL while it fetches: the other holds every bucket within seconds and
 * reconciles what was left. The fake platform, which answers after 100 ms, never has two requests
 * of one store in flight at once; in the end every store is reconciled, once each as far as the
 * schedule counts, and `/api/v1/reconcile/runs` says so exactly.
 */

const USERS = [
  { id: '601', stores: Array.from({ length: 12 }, (_, i) => String(31 + i)) },
  { id: '602', stores: Array.from({ length: 12 }, (_, i) => String(51 + i)) },
];
const STORES = USERS.flatMap((user) => user.stores);
const PRODUCTS_PER_STORE = 3;

let platform: FakePlatform;
let database: TestDatabase;
let db: pg.Pool;
let dir: string;
let first: DaemonProcess;
let second: DaemonProcess;
let third: DaemonProcess;
let fourth: DaemonProcess;

async function start(roles: string): Promise<DaemonProcess> {
  const port = await freePort();
  return DaemonProcess.start({
    cwd: dir,
    port,
    readyTimeoutMs: 120_000,
    env: {
      DATABASE_URL: database.url,
      DATA_DIR: dir,
      TOKEN_ENCRYPTION_KEY: Buffer.alloc(32, 42).toString('base64'),
      WEBHOOK_KEYS: WEBHOOK_KEY,
      API_TOKENS: API_TOKEN,
      HOST: '127.0.0.1',
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      LOG_LEVEL: 'info',
      SANDBOX: 'false',
      UPSTREAM_AUTH_URL: platform.url,
      UPSTREAM_BASE_URL: platform.url,
      OAUTH_CLIENT_ID: 'bench-client',
      OAUTH_CLIENT_SECRET: 'bench-client-secret-0123456789',
      STORE_IDS: STORES.join(','),
      RECONCILE_INTERVAL: '1h',
      RECONCILE_CONCURRENCY: '4',
      UPSTREAM_RATE_LIMIT: '10',
      ROLES: roles,
      // As startDaemon does: with TEST_THROUGH_POOLER=1, the leases' sessions on the direct URL.
      ...(process.env.TEST_THROUGH_POOLER
        ? { DATABASE_URL: pooledUrl(database.url), DATABASE_DIRECT_URL: database.url }
        : {}),
    },
  });
}

/** The backend pid holding each reconcile bucket. */
async function holders(): Promise<Map<number, number>> {
  const { rows } = await db.query(
    `SELECT objid::int AS bucket, pid FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND classid = $1 AND objsubid = 2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    [LOCK_SPACES.reconcileBucket],
  );
  return new Map(rows.map((row) => [row.bucket as number, row.pid as number]));
}

/** The bucket counts a process logged holding, in order. */
function sharesLogged(daemon: DaemonProcess): number[] {
  return daemon.logs
    .split('\n')
    .filter((line) => line.includes('"reconcile share"'))
    .map((line) => JSON.parse(line.slice(line.indexOf('{'))).buckets as number);
}

const sharesOf = (held: Map<number, number>) =>
  [...new Set(held.values())].map((pid) => [...held].filter(([, holder]) => holder === pid).length).sort();

beforeAll(async () => {
  platform = await startFakePlatform({ users: USERS, latencyMs: 100, productsPerStore: PRODUCTS_PER_STORE });
  database = await createTestDatabase();
  db = new pg.Pool({ connectionString: database.url, max: 2 });
  dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-spread-'));
  // The projector stays with the survivor: a run's catch-up then always has one to wait for.
  first = await start('ingress,api,sinks,reconcile,console');
  second = await start('ingress,api,projector,sinks,reconcile,console');
}, 300_000);

afterAll(async () => {
  await DaemonProcess.killAll();
  await db?.end();
  await database?.drop();
  await platform?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

it('two processes share the buckets, never fetch one store at once, and after a kill -9 of one the other reconciles every store', async () => {
  // Shared 32 and 32 between the two sessions.
  await eventually(async () => expect(sharesOf(await holders())).toEqual([32, 32]), 30_000, 200);
  const before = await holders();
  for (const _ of USERS) await connect(first.url);

  // Once both are fetching, the first is killed.
  await eventually(async () => expect(platform.requests.length).toBeGreaterThanOrEqual(30), 30_000, 20);
  const killedAt = Date.now();
  first.kill('SIGKILL');
  await first.waitForExit(10_000);
  const survivor = await eventually(
    async () => {
      const held = await holders();
      expect(sharesOf(held)).toEqual([RECONCILE_BUCKETS]);
      return held.get(0)!;
    },
    10_000,
    50,
  );
  const takeoverMs = Date.now() - killedAt;
  expect(takeoverMs).toBeLessThan(5000);
  const deadPid = [...new Set(before.values())].find((pid) => pid !== survivor)!;
  const deadBuckets = new Set([...before].filter(([, pid]) => pid === deadPid).map(([bucket]) => bucket));
  expect(deadBuckets.size).toBe(32);

  // Every store reconciled, and the progress says exactly that: 24 done (the 12 stores each
  // connection's owner lacks answered 404, and are not counted), none pending or failing.
  const progress = await eventually(
    async () => {
      const answer = await api(second.url, '/api/v1/reconcile/runs?limit=100');
      // Every store in a saved run's report (a run's stores are recorded just before it is saved).
      const reported = new Set(
        (answer.json.data as Json[]).flatMap((run) => run.stores.map((store: Json) => store.store_id)),
      );
      expect({
        done: answer.json.stores_done,
        pending: answer.json.stores_pending,
        failing: answer.json.stores_failing,
        reported: reported.size,
      }).toEqual({ done: 24, pending: 0, failing: 0, reported: STORES.length });
      return answer.json;
    },
    90_000,
    250,
  );
  const nextDue = Date.parse(progress.next_due_at);
  expect(nextDue).toBeGreaterThan(Date.now() + 0.4 * 3_600_000);
  expect(nextDue).toBeLessThan(Date.now() + 1.6 * 3_600_000);
  // The status says the same, through the API and on the CLI's screen.
  expect((await api(second.url, '/api/v1/status')).json.reconcile).toEqual({
    stores_done: 24,
    stores_pending: 0,
    stores_failing: 0,
    next_due_at: progress.next_due_at,
  });
  const screen = await runCli(['status'], { DATABASE_URL: database.url, LOG_LEVEL: 'warn' }, dir);
  expect({ line: /stores: .*/.exec(screen.stdout)?.[0], run: describeRun(screen) }).toEqual({
    line: expect.stringMatching(/^stores: 24 done, 0 pending, 0 failing; next due in \d+ (min|h)$/),
    run: expect.any(String),
  });
  // The runs: the connections' stores went first, each reconciled cleanly.
  const runs = progress.data as Json[];
  expect(runs.length).toBeGreaterThan(0);
  expect(new Set(runs.map((run) => `${run.trigger} ${run.outcome}`))).toEqual(new Set(['connection ok']));
  const reported = runs.flatMap((run) => run.stores as Json[]);
  expect(reported.filter((store) => store.errors.length > 0)).toEqual([]);
  expect([...new Set(reported.map((store) => store.store_id))].sort()).toEqual([...STORES].sort());
  // Each resource was created once, whichever process fetched its store (some twice: killed midway).
  const events = (await api(second.url, '/api/v1/events?limit=1000')).json.data as Json[];
  const created = events
    .filter((event) => event.source === 'reconcile' && event.event_type === 'product.created')
    .map((event) => event.subject.id);
  expect(created.length).toBe(STORES.length * PRODUCTS_PER_STORE);
  expect(new Set(created).size).toBe(created.length);

  // Never two requests of one store in flight, and every store of every owner fetched whole at least once.
  expect(platform.maxInFlightPerStore).toBe(1);
  const fetchedWhole = (request: { status: number; resource: string }) =>
    request.status === 200 && request.resource === 'orders';
  for (const user of USERS)
    for (const store of user.stores)
      expect({
        store,
        whole: platform.requests.some(
          (request) => request.user === user.id && request.storeId === store && fetchedWhole(request),
        ),
      }).toEqual({ store, whole: true });
  // The survivor fetched stores of the dead process's buckets after the kill: it took them over.
  const connections = (await api(second.url, '/api/v1/connections')).json.data as Json[];
  const connectionOf = new Map(connections.map((connection) => [connection.owner_id, connection.id]));
  const takenOver = platform.requests.filter(
    (request) =>
      request.arrivedAt > killedAt &&
      fetchedWhole(request) &&
      deadBuckets.has(storeBucket(connectionOf.get(request.user!), request.storeId)),
  );
  expect(takenOver.length).toBeGreaterThan(0);

  // The mirror has every store's products.
  for (const user of USERS) {
    const products = await eventually(
      async () => {
        const answer = await api(second.url, `/api/v1/products?owner_id=${user.id}&limit=1000`);
        expect(answer.json.data).toHaveLength(user.stores.length * PRODUCTS_PER_STORE);
        return answer.json.data as Json[];
      },
      30_000,
      200,
    );
    expect(products.every((product) => product.attributes.title === `Product ${product.id}`)).toBe(true);
  }
  // Both processes had their share, and the survivor all of them at the end: each logged it.
  expect([sharesLogged(first), sharesLogged(second)]).toEqual([
    expect.arrayContaining([32]),
    expect.arrayContaining([32, RECONCILE_BUCKETS]),
  ]);

  // A third process joins while every store is due again and answers take a second: the survivor
  // hands buckets on under way, and still no store is fetched twice at once; the runs of the
  // spread reconcile every store, some in each process.
  platform.latencyMs = 1000;
  await db.query(`UPDATE reconcile_stores SET next_due_at = now()`);
  third = await start('ingress,api,sinks,reconcile,console');
  await eventually(async () => expect(sharesOf(await holders())).toEqual([32, 32]), 30_000, 200);
  const spread = await eventually(
    async () => {
      const answer = await api(second.url, '/api/v1/reconcile/runs?limit=100');
      const ofSpread = (answer.json.data as Json[]).filter((run) => run.trigger === 'spread');
      expect({
        stores: new Set(ofSpread.flatMap((run) => run.stores.map((store: Json) => store.store_id))).size,
        done: answer.json.stores_done,
        pending: answer.json.stores_pending,
        failing: answer.json.stores_failing,
      }).toEqual({ stores: STORES.length, done: 24, pending: 0, failing: 0 });
      return ofSpread;
    },
    90_000,
    250,
  );
  expect(new Set(spread.map((run) => run.outcome))).toEqual(new Set(['ok']));
  expect(spread.flatMap((run) => run.stores as Json[]).every((store) => store.events_appended === 0)).toBe(true);
  expect(platform.maxInFlightPerStore).toBe(1);
  expect(sharesLogged(third)).toEqual(expect.arrayContaining([32]));
  const spreadRunsOf = (daemon: DaemonProcess) =>
    daemon.logs.split('\n').filter((line) => line.includes('"trigger":"spread"') && line.includes('"reconcile ok"'));
  expect([spreadRunsOf(second).length > 0, spreadRunsOf(third).length > 0]).toEqual([true, true]);

  // Every process stopped, for longer than RECONCILE_DOWNTIME_AFTER (the clock moved back by 15
  // minutes in the database): the next to start continues the schedule, every store first.
  platform.latencyMs = 100;
  for (const daemon of [second, third]) {
    daemon.kill('SIGTERM');
    await daemon.waitForExit(15_000);
  }
  await db.query(`UPDATE reconcile_schedule SET alive_at = alive_at - interval '15 minutes'`);
  await db.query(`UPDATE reconcile_stores SET last_reconciled_at = last_reconciled_at - interval '15 minutes'`);
  await db.query(`UPDATE subscriptions SET created_at = created_at - interval '15 minutes'`);
  fourth = await start('ingress,api,projector,sinks,reconcile,console');
  const downtime = await eventually(
    async () => {
      const answer = await api(fourth.url, '/api/v1/reconcile/runs?limit=100');
      const ofDowntime = (answer.json.data as Json[]).filter((run) => run.trigger === 'downtime');
      expect({
        stores: new Set(ofDowntime.flatMap((run) => run.stores.map((store: Json) => store.store_id))).size,
        done: answer.json.stores_done,
        pending: answer.json.stores_pending,
        failing: answer.json.stores_failing,
      }).toEqual({ stores: STORES.length, done: 24, pending: 0, failing: 0 });
      return ofDowntime;
    },
    60_000,
    250,
  );
  expect(new Set(downtime.map((run) => run.outcome))).toEqual(new Set(['ok']));
  expect(fourth.logs).toContain('every store first');
  expect(platform.maxInFlightPerStore).toBe(1);
}, 300_000);

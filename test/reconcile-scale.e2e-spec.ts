import { mostInWindow, startFakePlatform } from '../bench/lib/fake-platform.js';
import type { FakePlatform, PlatformRequest } from '../bench/lib/fake-platform.js';
import { CliResult, describeRun, runCli } from './support/cli.js';
import { connect } from './support/connect.js';
import { freePort } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import { api, RunningDaemon, startDaemon } from './support/http.js';
import type { Json } from './support/menu-events.js';

/**
 * Reconcile at scale (docs/reference.md §13, issue 42) against a fake platform on loopback with two
 * users of three stores each, a daemon connected to both, and `menu-sync reconcile` with 4 workers:
 * a storm of 429s (Retry-After: 2) on one connection pauses every caller of that connection while
 * the other goes on, and the pass completes afterwards with each repair appended once; no more
 * than UPSTREAM_RATE_LIMIT requests a second per connection nor RECONCILE_CONCURRENCY in flight; a
 * store that hangs is given up at RECONCILE_STORE_TIMEOUT, reported, and fetched again later,
 * while the others of its connection are compared and appended without waiting for it.
 */

const USERS = [
  { id: '501', stores: ['11', '12', '13'] },
  { id: '502', stores: ['21', '22', '23'] },
];
const STORES = USERS.flatMap((user) => user.stores);
const RATE = 10;
const CONCURRENCY = 4;
const STORE_TIMEOUT_S = 2;
/** A request the client had already sent when a 429 reached it arrives this soon after the 429 at most. */
const ON_ITS_WAY_MS = 200;

let platform: FakePlatform;
let daemon: RunningDaemon;

const product = (store: string, index: number) => String(1_000_000 + Number(store) * 10 + index);
const runs = async (): Promise<Json[]> => (await api(daemon.url, '/api/v1/reconcile/runs?limit=100')).json.data;

async function reconcile(extraEnv: Record<string, string> = {}): Promise<{ run: Json; result: CliResult }> {
  const env = { ...daemon.process.env, ...extraEnv };
  delete env.PATH;
  delete env.HOME;
  const result = await runCli(['reconcile'], env, daemon.process.cwd);
  const document = /^\{\n[\s\S]*?^\}$/m.exec(result.stdout);
  if (result.code !== 0 || !document) throw new Error(`reconcile failed:\n${describeRun(result)}`);
  return { run: JSON.parse(document[0]).data, result };
}

/** The reconcile events of one run, as `type id title`. */
async function repairsOf(runStartedAt: string): Promise<string[]> {
  const events = (await api(daemon.url, '/api/v1/events?limit=1000')).json.data as Json[];
  return events
    .filter((event) => event.source === 'reconcile' && Date.parse(event.received_at) >= Date.parse(runStartedAt))
    .map((event) => `${event.subject.type} ${event.subject.id}`)
    .sort();
}

async function titleOf(id: string): Promise<string> {
  return (await api(daemon.url, `/api/v1/products/${id}`)).json?.attributes?.title;
}

const of = (user: string, from: number) => (request: PlatformRequest) =>
  request.user === user && request.arrivedAt >= from;

beforeAll(async () => {
  platform = await startFakePlatform({ users: USERS });
  const port = await freePort();
  daemon = await startDaemon({
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    UPSTREAM_AUTH_URL: platform.url,
    UPSTREAM_BASE_URL: platform.url,
    OAUTH_CLIENT_ID: 'bench-client',
    OAUTH_CLIENT_SECRET: 'bench-client-secret-0123456789',
    STORE_IDS: STORES.join(','),
    RECONCILE_CONCURRENCY: String(CONCURRENCY),
    UPSTREAM_RATE_LIMIT: String(RATE),
    RECONCILE_STORE_TIMEOUT: String(STORE_TIMEOUT_S),
  });
  for (const _ of USERS) await connect(daemon.url);
  // Each connection's own run imports its owner's menu: 3 stores of 1 collection and 3 products.
  await eventually(
    async () => {
      const done = (await runs()).filter((run) => run.trigger === 'connection');
      expect(done.map((run) => run.outcome)).toEqual(['ok', 'ok']);
    },
    30_000,
    200,
  );
  await eventually(async () => expect(await titleOf(product('23', 2))).toBe(`Product ${product('23', 2)}`), 15_000);
}, 120_000);

afterAll(async () => {
  await daemon?.close();
  await platform?.close();
});

it('a storm of 429s pauses every caller of that connection, the other goes on, and the pass completes with each repair once', async () => {
  for (const store of ['11', '13', '21']) platform.rename(product(store, 0), `Renamed in store ${store}`);
  const armedAt = Date.now();
  let stormEndsAt = Infinity;
  platform.fault = (request) => {
    if (request.user !== '501') return undefined;
    if (stormEndsAt === Infinity) stormEndsAt = request.arrivedAt + 5000;
    return request.arrivedAt < stormEndsAt ? { status: 429, headers: { 'retry-after': '2' } } : undefined;
  };
  // Waiting out the storm is part of a store's time: more than the 2 s of the hanging store below.
  const { run } = await reconcile({ RECONCILE_STORE_TIMEOUT: '60' });
  platform.fault = () => undefined;

  expect(run.outcome).toBe('ok');
  expect(
    run.stores.map((store: Json) => [store.connection_id, store.store_id, store.events_appended, store.errors]),
  ).toEqual([
    [1, '11', 1, []],
    [1, '12', 0, []],
    [1, '13', 1, []],
    [2, '21', 1, []],
    [2, '22', 0, []],
    [2, '23', 0, []],
  ]);
  // Each repair once, though the storm had its calls answered 429 and sent again.
  expect(await repairsOf(run.started_at)).toEqual(['product 1000110', 'product 1000130', 'product 1000210']);
  await eventually(async () => expect(await titleOf(product('13', 0))).toBe('Renamed in store 13'), 15_000);

  const mine = platform.requests.filter(of('501', armedAt));
  const storm = mine.filter((request) => request.status === 429);
  expect(storm.length).toBeGreaterThanOrEqual(2);
  // After each 429, no request of that connection left for 2 s: only those already on their way.
  const tooSoon = mine.filter((request) =>
    storm.some(
      (answer) =>
        request.arrivedAt >= answer.answeredAt + ON_ITS_WAY_MS && request.arrivedAt < answer.answeredAt + 2000,
    ),
  );
  expect(tooSoon).toEqual([]);
  // The other connection was not paused: it had finished before the storm ended.
  const other = platform.requests.filter(of('502', armedAt));
  expect(other.map((request) => request.status)).toEqual(
    other.map((request) => (request.storeId.startsWith('2') ? 200 : 404)),
  );
  expect(Math.max(...other.map((request) => request.arrivedAt))).toBeLessThan(stormEndsAt);
  // The pass completed after the storm.
  expect(Date.parse(run.finished_at)).toBeGreaterThan(stormEndsAt);
  for (const user of USERS)
    expect(
      mostInWindow(platform.requests.filter(of(user.id, armedAt)).map((request) => request.arrivedAt)),
    ).toBeLessThanOrEqual(RATE);
  expect(platform.maxInFlight).toBeLessThanOrEqual(CONCURRENCY);
});

it('a hanging store is given up at its timeout and fetched again later, while the others of its connection are appended without it', async () => {
  for (const store of ['11', '12']) platform.rename(product(store, 1), `Renamed again in store ${store}`);
  let hung = 0;
  platform.fault = (request) => {
    if (request.user !== '501' || request.storeId !== '12' || request.resource !== 'collections' || hung >= 2)
      return undefined;
    hung++;
    return 'hang';
  };
  const { run } = await reconcile();
  platform.fault = () => undefined;

  expect(hung).toBe(2);
  expect(run.outcome).toBe('ok');
  const [, twelve] = run.stores;
  expect(twelve).toMatchObject({ store_id: '12', events_appended: 1, errors: [] });
  // Compared by itself when it came: its owner has 3 stores, so nothing it lacks is destroyed.
  expect(twelve.notes).toEqual([
    `attempt 1 of 3: no snapshot within ${STORE_TIMEOUT_S} s; tried again later`,
    `attempt 2 of 3: no snapshot within ${STORE_TIMEOUT_S} s; tried again later`,
    expect.stringMatching(/^collection: destroys skipped: the owner has 3 stores, .*; 2 absent resource\(s\) kept$/),
    expect.stringMatching(/^product: destroys skipped: the owner has 3 stores, .*; 6 absent resource\(s\) kept$/),
  ]);
  expect(twelve.duration_ms).toBeGreaterThanOrEqual(2 * STORE_TIMEOUT_S * 1000);
  // Store 11 was appended after store 12's first timeout, not after its last attempt.
  const events = (await api(daemon.url, '/api/v1/events?limit=1000')).json.data as Json[];
  const receivedAt = (id: string) =>
    Date.parse(events.filter((event) => event.subject.id === id && event.source === 'reconcile').at(-1).received_at);
  const eleven = receivedAt(product('11', 1));
  const late = receivedAt(product('12', 1));
  expect(late - eleven).toBeGreaterThanOrEqual(STORE_TIMEOUT_S * 1000);
  expect(eleven - Date.parse(run.started_at)).toBeLessThan(STORE_TIMEOUT_S * 1000 + 3000);
  expect(await repairsOf(run.started_at)).toEqual(['product 1000111', 'product 1000121']);
  await eventually(async () => expect(await titleOf(product('12', 1))).toBe('Renamed again in store 12'), 15_000);
});

// Reconcile benchmark (issue 42): a whole pass over many stores against a fake platform on
// loopback whose every answer takes 50 ms (bench/lib/fake-platform.js), with the defaults and
// with RECONCILE_CONCURRENCY 1, 8 and 32, and with the rate budget lifted; requests in flight
// and per second seen by the platform; the CPU of the reconcile process per store.
//
//   fake platform (N users) -> migrated database -> `serve` -> N connections through the OAuth
//   flow -> one order.created webhook per store (the daemon learns its stores) -> an import pass
//   -> per setting: 1 % of the stores' products renamed upstream, then one timed pass
//   (`menu-sync reconcile`, a process of its own whose CPU is read from /proc).
//
//   node bench/run.js reconcile --stores=1000 --connections=10 --concurrency=1,8,32
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { loadavg } from 'node:os';
import { createMigratedDatabase, databaseUrl, dropDatabase } from './lib/database.js';
import { sampleCpu } from './lib/cpu.js';
import { DOCUMENTS_PER_STORE, mostInWindow, startFakePlatform } from './lib/fake-platform.js';
import { freePort, startService, stopService, waitReady } from './lib/processes.js';
import { connectUser, learnStores, projected, reconcileOnce } from './lib/reconcile-setup.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const LATENCY_MS = 50;
const DEFAULT_RATE = 10;
const DEFAULT_CONCURRENCY = 8;
/** The rate of the rows that lift the budget: high enough never to be the bound here. */
const LIFTED_RATE = 1000;
/** Requests each bare-client baseline sends: it measures a rate, not a pass. */
const BASELINE_REQUESTS = 2000;

export const description =
  'reconcile: one pass over 10,000 stores of 10 connections against a 50 ms fake platform, by RECONCILE_CONCURRENCY and rate budget, vs a bare client';
export const defaults = { stores: [10_000], connections: [10], concurrency: [1, 8, 32] };

export async function run({
  stores: [stores] = defaults.stores,
  connections = defaults.connections,
  concurrency = defaults.concurrency,
  logDir,
}) {
  mkdirSync(logDir, { recursive: true });
  const users = usersOf(stores, connections[0]);
  const platform = await startFakePlatform({ users, latencyMs: LATENCY_MS });
  const env = {
    ...process.env,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    HOST: '127.0.0.1',
    SANDBOX: 'false',
    LOG_LEVEL: 'warn',
    RECONCILE_CRON: 'off',
    UPSTREAM_AUTH_URL: platform.url,
    UPSTREAM_BASE_URL: platform.url,
    OAUTH_CLIENT_ID: 'bench-client',
    OAUTH_CLIENT_SECRET: 'bench-client-secret-0123456789',
  };
  delete env.API_TOKENS;
  delete env.RECONCILE_CONCURRENCY;
  delete env.UPSTREAM_RATE_LIMIT;
  const database = await createMigratedDatabase({ cwd: ROOT, env, suffix: 'reconcile' });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  Object.assign(env, { DATABASE_URL: databaseUrl(database), PORT: String(port), PUBLIC_URL: base });
  const daemon = startService('node', ['dist/src/main.js', 'serve'], {
    cwd: ROOT,
    env,
    logFile: join(logDir, 'reconcile-daemon.log'),
  });
  try {
    await waitReady(daemon, `${base}/health/ready`, 180_000);
    for (const _ of users) await connectUser(base);
    let t = performance.now();
    await learnStores(platform, users);
    await projected(base);
    log(`${stores} stores of ${users.length} connections learned in ${seconds(t)} s`);
    t = performance.now();
    const imported = await reconcileOnce({
      root: ROOT,
      env: { ...env, RECONCILE_CONCURRENCY: '32', UPSTREAM_RATE_LIMIT: String(LIFTED_RATE) },
    });
    await projected(base);
    log(`import pass: ${imported.run.outcome}, ${appended(imported.run)} events in ${seconds(t)} s`);
    const boot = await reconcileOnce({ root: ROOT, env, args: ['--store', '0'] });
    log(
      `a pass over no store: ${boot.seconds.toFixed(1)} s, ${Math.round(boot.cpuMs)} ms CPU (taken out of the per-store CPU)`,
    );

    const rows = [];
    const settings = [
      { label: 'defaults', concurrency: DEFAULT_CONCURRENCY, rate: DEFAULT_RATE, env: {} },
      ...concurrency
        .filter((c) => c !== DEFAULT_CONCURRENCY)
        .map((c) => ({
          label: `concurrency ${c}`,
          concurrency: c,
          rate: DEFAULT_RATE,
          env: { RECONCILE_CONCURRENCY: String(c) },
        })),
      ...concurrency
        .filter((c) => c > 1)
        .map((c) => ({
          label: `concurrency ${c}, budget lifted`,
          concurrency: c,
          rate: LIFTED_RATE,
          env: { RECONCILE_CONCURRENCY: String(c), UPSTREAM_RATE_LIMIT: String(LIFTED_RATE) },
        })),
    ];
    for (const [index, setting] of settings.entries()) {
      const renamed = renameSome(platform, users, index);
      platform.requests = [];
      platform.maxInFlight = 0;
      const cpu = sampleCpu(daemon.pid, null);
      const pass = await reconcileOnce({ root: ROOT, env: { ...env, ...setting.env } });
      const used = cpu();
      rows.push(measured(setting, pass, used, { platform, users, stores, renamed, boot }));
      log(
        `${setting.label}: ${pass.seconds.toFixed(1)} s, ${pass.run.outcome}, ${appended(pass.run)} of ${renamed} appended`,
      );
      await projected(base);
    }
    const baselines = [];
    for (const c of concurrency.filter((value) => value > 1)) baselines.push(await bareClient(platform, users, c));
    return report({ stores, users, rows, baselines, imported, boot });
  } finally {
    await stopService(daemon);
    await platform.close();
    await dropDatabase(database);
  }
}

/** `connections` users sharing the stores 1..stores in turn. */
function usersOf(stores, connections) {
  const users = Array.from({ length: connections }, (_, i) => ({ id: String(7001 + i), stores: [] }));
  for (let store = 1; store <= stores; store++) users[(store - 1) % connections].stores.push(String(store));
  return users;
}

/** Renames the first product of every 100th store upstream: what the next pass must find. */
function renameSome(platform, users, round) {
  let renamed = 0;
  for (const user of users)
    for (const [i, store] of user.stores.entries())
      if (i % 100 === round % 100) {
        platform.rename(String(1_000_000 + Number(store) * 10), `Renamed in round ${round}`);
        renamed++;
      }
  return renamed;
}

function measured(setting, pass, used, { platform, users, stores, renamed, boot }) {
  const requests = platform.requests.length;
  const perConnection = users.map((user) =>
    mostInWindow(platform.requests.filter((request) => request.user === user.id).map((request) => request.arrivedAt)),
  );
  // Each worker has one request in flight, on one connection at a time, whose budget lets
  // rate/1.1 a second through: at most min(workers, connections) budgets are busy at once.
  const budgets = Math.min(setting.concurrency, users.length) * (setting.rate / 1.1);
  const model = requests / Math.min(setting.concurrency / (LATENCY_MS / 1000), budgets);
  const failing = pass.run.stores.filter((store) => store.errors.length > 0).length;
  return {
    ...setting,
    seconds: round(pass.seconds, 1),
    modelSeconds: round(model, 1),
    storesPerSecond: round(stores / pass.seconds, 1),
    requests,
    requestsPerSecond: round(requests / pass.seconds, 1),
    maxInFlight: platform.maxInFlight,
    maxPerConnectionPerSecond: Math.max(...perConnection),
    maxTotalPerSecond: mostInWindow(platform.requests.map((request) => request.arrivedAt)),
    cpuMsPerStore: round((pass.cpuMs - boot.cpuMs) / stores, 2),
    peakRssMiB: Math.round(pass.peakRssMiB),
    serveCpuPct: used.serverPct,
    postgresCpuPct: used.postgresPct,
    otherCpuPct: used.otherPct,
    outcome: pass.run.outcome,
    appended: appended(pass.run),
    renamed,
    failing,
  };
}

/** The same documents fetched by `concurrency` plain fetch loops, no budget, no database: what the platform and the loopback allow. */
async function bareClient(platform, users, concurrency) {
  const tokens = new Map(users.map((user) => [user.id, platform.tokenFor(user.id)]));
  const documents = ['collections', 'products', 'traits', 'trait_options', 'orders'];
  const work = users
    .flatMap((user) => user.stores.map((store) => ({ user: user.id, store })))
    .flatMap((item) => documents.map((document) => ({ ...item, document })))
    .slice(0, BASELINE_REQUESTS);
  let next = 0;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < work.length) {
        const { user, store, document } = work[next++];
        const answer = await fetch(`${platform.url}/stores/${store}/${document}`, {
          headers: { authorization: `Bearer ${tokens.get(user)}`, accept: 'application/vnd.service.v2' },
        });
        await answer.json();
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  const elapsed = (performance.now() - started) / 1000;
  return {
    concurrency,
    requests: work.length,
    requestsPerSecond: round(work.length / elapsed, 1),
    cpuMsPerStore: round(((cpu.user + cpu.system) / 1000 / work.length) * DOCUMENTS_PER_STORE, 2),
  };
}

function report({ stores, users, rows, baselines, imported, boot }) {
  const load = loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
  return {
    settings: {
      stores,
      connections: users.length,
      latencyMs: LATENCY_MS,
      documentsPerStore: DOCUMENTS_PER_STORE,
      loadavg: load,
    },
    import: { seconds: round(imported.seconds, 1), outcome: imported.run.outcome, appended: appended(imported.run) },
    boot: { seconds: round(boot.seconds, 1), cpuMs: Math.round(boot.cpuMs) },
    rows,
    baselines,
    tables: [
      {
        title: `reconcile: one pass over ${stores} stores of ${users.length} connections, ${LATENCY_MS} ms answers (1 % of the stores changed; load average at the end ${load})`,
        columns: [
          'setting',
          'pass s',
          'model s',
          'stores/s',
          'req/s',
          'max in flight',
          'max req/s per conn',
          'max req/s all',
          'CPU ms/store',
          'peak RSS MiB',
          'pg %',
          'other %',
          'outcome',
          'appended',
        ],
        rows: rows.map((row) => [
          `${row.label} (${row.concurrency}, ${row.rate}/s)`,
          row.seconds,
          row.modelSeconds,
          row.storesPerSecond,
          row.requestsPerSecond,
          row.maxInFlight,
          row.maxPerConnectionPerSecond,
          row.maxTotalPerSecond,
          row.cpuMsPerStore,
          row.peakRssMiB,
          row.postgresCpuPct,
          row.otherCpuPct,
          row.outcome,
          `${row.appended}/${row.renamed}`,
        ]),
      },
      {
        title: `baseline: a bare fetch loop (no budget, no database) over the first ${BASELINE_REQUESTS} of the same documents, in this process`,
        columns: ['concurrency', 'req/s', 'CPU ms per 5 documents'],
        rows: baselines.map((row) => [row.concurrency, row.requestsPerSecond, row.cpuMsPerStore]),
      },
    ],
  };
}

const appended = (run) => run.stores.reduce((sum, store) => sum + store.events_appended, 0);
const round = (value, digits) => Math.round(value * 10 ** digits) / 10 ** digits;
const seconds = (since) => ((performance.now() - since) / 1000).toFixed(1);

function log(message) {
  console.error(`  ${message}`);
}

// bench/query: the query API's reads on a 1M- (and 3M-) event log, the daemon next to a bare
// node:http + pg server running the same reads with the same SQL (bench/query-baseline-server.js)
// in the same run. The log is bench/projection's (owners 1001–1005 with ~10,000 live products
// each) plus an owner `q2000` with 2,000 products, each created and updated 4 times across the
// log's time span; the daemon projects it all, then:
//   /menu 2,000 and 10,000 products, the 304 path, as_of list page and by id, menu?as_of,
//   live reads by id and page, ingress p99 idle and during heavy /menu reads, /health/live p99
//   while a 10,000-product /menu is built (the event loop is never held), peak RSS.
// Then EXPLAIN (ANALYZE, BUFFERS) of the hot statements into bench/explain/.
//
//   node bench/run.js query [--events=1m|3m|1m,3m] [--duration=5]
//   While working on one read: --keep-database once (the filled, projected database is kept and
//   named), then --database=NAME --only=asOfPage,liveId to measure those reads again in seconds.
import { randomBytes } from 'node:crypto';
import { get as httpGet } from 'node:http';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { createMigratedDatabase, databaseUrl, dropDatabase, keepDatabase as leaveDatabase } from './lib/database.js';
import { eventBodies } from './lib/events.js';
import { firstCreatedAt } from './lib/projection-events.js';
import { asOfStatement } from './lib/query-statements.js';
import { freePort, memoryOf, startService, stopService, waitReady } from './lib/processes.js';
import { fill } from './projection.js';
import { menuSections } from '../dist/src/menu/menu-sections.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const BIG_OWNER = '1001';
const SMALL_OWNER = 'q2000';
const SMALL = { first: 800_001, products: 2_000, revisions: 5 };
const TARGET = {
  menu2kP99Ms: 150,
  menu10kMs: 1000,
  notModifiedRps: 2000,
  notModifiedP99Ms: 10,
  asOfP99Ms: 50,
  asOfGrowth: 1.5,
  menuAsOfMs: 1000,
  liveRatio: 0.8,
  ingressRatio: 2,
  rssMiB: 400,
};

export const description =
  'query API reads (/menu, 304, as_of, live) on 1M/3M events vs bare node:http + pg with the same SQL';
export const defaults = { duration: 5, events: '1m' };

export async function run({
  duration = defaults.duration,
  events = defaults.events,
  logDir,
  database,
  keepDatabase = false,
  only,
}) {
  mkdirSync(logDir, { recursive: true });
  const sizes = String(events)
    .split(',')
    .map((size) => {
      if (!/^\d+[km]$/.test(size)) throw new Error(`--events must be sizes like 1m, 3m or 1m,3m (got ${size})`);
      return size;
    });
  const results = [];
  if (database !== undefined && sizes.length !== 1)
    throw new Error('--database measures one kept database: give one --events size');
  for (const size of sizes) results.push(await measureSize(size, duration, logDir, { database, keepDatabase, only }));
  const tables = results.flatMap((result) => result.tables);
  if (results.length === 2) {
    const [small, large] = results;
    const growth = (key) => Math.round((large.daemon[key].p99 / Math.max(1, small.daemon[key].p99)) * 100) / 100;
    tables.push({
      title: 'query: as_of growth 1M → 3M (p99)',
      columns: ['read', 'growth', 'target'],
      rows: ['asOfPage', 'asOfId', 'asOfPage1', 'asOfId1'].map((key) => [
        key,
        `${growth(key)}x`,
        `<= ${TARGET.asOfGrowth}x`,
      ]),
    });
  }
  return {
    settings: {
      sizes,
      durationSeconds: duration,
      connections: 10,
      machine: 'shared with other work: see the CPU notes',
    },
    results: results.map(({ tables: _, ...rest }) => rest),
    tables,
  };
}

async function measureSize(size, duration, logDir, { database: kept, keepDatabase, only }) {
  const events = Number(size.slice(0, -1)) * (size.endsWith('m') ? 1_000_000 : 1_000);
  const webhookKey = `bench_${randomBytes(12).toString('hex')}`;
  const env = {
    ...process.env,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    WEBHOOK_KEYS: webhookKey,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    SANDBOX: 'false',
    RECONCILE_CRON: 'off',
  };
  const database = kept ?? (await createMigratedDatabase({ cwd: ROOT, env, suffix: `query_${size}` }));
  const url = databaseUrl(database);
  const client = new pg.Client({ connectionString: url, application_name: 'menu-sync-bench' });
  await client.connect();
  const services = [];
  try {
    const filled = kept === undefined ? await fill(client, events) : null;
    const span = kept === undefined ? await fillSmallOwner(client, events) : await smallOwnerSpan(client, events);
    const daemonPort = await freePort();
    // As `npm start` and the Docker image run it (package.json, Dockerfile).
    const daemon = startService('node', ['--max-semi-space-size=32', 'dist/src/main.js', 'serve'], {
      cwd: ROOT,
      env: { ...env, DATABASE_URL: url, PORT: String(daemonPort) },
      logFile: join(logDir, `query-${size}-daemon.log`),
    });
    services.push(daemon);
    const daemonBase = `http://127.0.0.1:${daemonPort}`;
    await waitReady(daemon, `${daemonBase}/health/live`, 60_000);
    const projected = await waitProjected(client, events + SMALL.products * SMALL.revisions);
    if (kept === undefined)
      await client.query(
        'VACUUM (ANALYZE) event_log, proj_menu.products, proj_menu.traits, proj_menu.trait_options, proj_menu.collections',
      );
    await settle(client);
    const baselinePort = await freePort();
    const baseline = startService('node', [join(HERE, 'query-baseline-server.js')], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: url, PORT: String(baselinePort) },
      logFile: join(logDir, `query-${size}-baseline.log`),
    });
    services.push(baseline);
    const baselineBase = `http://127.0.0.1:${baselinePort}`;
    await waitReady(baseline, `${baselineBase}/health/live`);
    const asOf = span.middle;
    const ids = await sampleIds(client);
    log(`  ${size}: measuring, each read on the daemon then on the baseline`);
    const measured = await measureReads({
      bases: { daemon: daemonBase, baseline: baselineBase },
      duration,
      asOf,
      ids,
      webhookKey,
      only,
      daemonPeak: () => round(memoryOf(daemon.pid).peakRssMiB, 1),
    });
    if (only !== undefined) {
      measured.daemon.peakRssMiB = round(memoryOf(daemon.pid).peakRssMiB, 1);
      return {
        size,
        events,
        daemon: measured.daemon,
        baseline: measured.baseline,
        tables: [onlyTable(size, only, measured)],
      };
    }
    measured.daemon.peakRssMiB = round(memoryOf(daemon.pid).peakRssMiB, 1);
    writeExplains(size, await explains(client, asOf, ids));
    return {
      size,
      events,
      filled,
      projectedSeconds: projected,
      daemon: measured.daemon,
      baseline: measured.baseline,
      tables: tables(size, measured),
    };
  } finally {
    for (const service of services) await stopService(service);
    await client.end().catch(() => undefined);
    if (kept === undefined && !keepDatabase) await dropDatabase(database);
    else {
      leaveDatabase(database);
      log(`  the database is kept: --database=${database}`);
    }
  }
}

/**
 * Lets the fill's aftermath pass before anything is timed: the dirty pages of a few GB written out
 * (CHECKPOINT) and autovacuum's workers gone quiet (up to 2 minutes), so that neither server's
 * figures carry PostgreSQL's background writes (a kept /menu read, 15-50 ms with curl, read
 * 47-177 ms right after a fill).
 */
async function settle(client) {
  await client.query('CHECKPOINT');
  const started = performance.now();
  let quietSince = performance.now();
  while (performance.now() - started < 120_000) {
    const {
      rows: [row],
    } = await client.query(
      `SELECT count(*)::int AS busy FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`,
    );
    if (row.busy > 0) quietSince = performance.now();
    else if (performance.now() - quietSince >= 5_000) break;
    await sleep(500);
  }
}

/** The as_of instant of a kept database: the middle of owner q2000's span, as fillSmallOwner chose it. */
async function smallOwnerSpan(client) {
  const {
    rows: [row],
  } = await client.query(
    `SELECT min(occurred_at) AS first, max(occurred_at) AS last FROM event_log WHERE owner_id = $1`,
    [SMALL_OWNER],
  );
  return { middle: new Date((row.first.getTime() + row.last.getTime()) / 2).toISOString() };
}

/** --only: the chosen measurements, daemon next to baseline. */
function onlyTable(size, only, { daemon, baseline }) {
  const cell = (value) =>
    value === undefined || value === null
      ? '-'
      : typeof value !== 'object'
        ? String(value)
        : 'rps' in value
          ? `${value.rps} req/s, p50 ${value.p50}, p99 ${value.p99} ms`
          : 'ms' in value
            ? `${value.ms.join(' / ')} ms`
            : String(value);
  return {
    title: `query ${size}: ${only.join(', ')} (daemon peak RSS ${daemon.peakRssMiB} MiB)`,
    columns: ['read', 'daemon', 'baseline'],
    rows: only.map((name) => [name, cell(daemon[name]), cell(baseline[name])]),
  };
}

/** Owner q2000: 2,000 products, each created then updated 4 times, spread over the log's time span. */
async function fillSmallOwner(client, events) {
  const first = new Date(firstCreatedAt(events));
  const last = new Date(Date.now() - 60_000);
  const spanMs = last.getTime() - first.getTime();
  await client.query(
    `
    INSERT INTO event_log (event_id, event_type, subject_type, subject_id, owner_id, occurred_at, event_seq, source, handled,
                           received_at, key_id, content_type, payload, sha256)
    SELECT event_id, event_type, 'product', sid::text, '${SMALL_OWNER}', occurred_at, seq, 'webhook', true, occurred_at, 'env:1',
           'application/json', payload::json, sha256(convert_to(payload, 'UTF8'))
      FROM (SELECT *, '{"data":{"id":"' || event_id || '","type":"webhook_event","attributes":{"id":' || seq || ',"created_at":"'
                   || to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '","event_type":"' || event_type
                   || '"},"relationships":{"subject":{"data":{"id":"' || sid || '","type":"product"}},"resource_owner":{"data":{"id":"${SMALL_OWNER}","type":"user"}}}},'
                   || '"included":[{"id":"' || sid || '","type":"product","attributes":{"id":' || sid || ',"title":"Product ' || sid || ' rev ' || rev
                   || '","description":"' || repeat('Slow-roasted pulled pork in a brioche bun. ', 8) || '","available":true},'
                   || '"relationships":{"traits":{"data":[' || traits || ']}}}]}' AS payload
              FROM (SELECT sid, rev, 900000000 + sid * 10 + rev AS seq, md5('q2000-' || sid || '-' || rev)::uuid::text AS event_id,
                           CASE WHEN rev = 0 THEN 'product.created' ELSE 'product.updated' END AS event_type,
                           $1::timestamptz + ((rev * ${SMALL.products} + (sid - ${SMALL.first})) * ($2::float8 / ${SMALL.products * SMALL.revisions})) * interval '1 millisecond' AS occurred_at,
                           (SELECT string_agg('{"id":"' || (200001 + (sid * 7 + j * 131) % 5000) || '","type":"trait"}', ',') FROM generate_series(0, 3) AS j) AS traits
                      FROM generate_series(${SMALL.first}, ${SMALL.first + SMALL.products - 1}) AS sid
                     CROSS JOIN generate_series(0, ${SMALL.revisions - 1}) AS rev) AS a) AS b`,
    [first.toISOString(), spanMs],
  );
  return { middle: new Date(first.getTime() + spanMs / 2).toISOString() };
}

async function waitProjected(client, total) {
  const started = performance.now();
  for (;;) {
    const {
      rows: [row],
    } = await client.query(`SELECT (SELECT applied FROM proj_menu.checkpoint)::bigint AS menu`);
    if (Number(row.menu) >= total) break;
    if (performance.now() - started > 1_800_000) throw new Error('the daemon did not project the log within 30 min');
    process.stderr.write(`\r  projecting: ${row.menu} / ${total}`);
    await sleep(1000);
  }
  const seconds = round((performance.now() - started) / 1000, 1);
  log(`\n  projected in ${seconds} s`);
  return seconds;
}

async function sampleIds(client) {
  const pick = async (owner) =>
    (
      await client.query(
        `SELECT id FROM proj_menu.products WHERE owner_id = $1 AND NOT deleted ORDER BY md5(id) LIMIT 200`,
        [owner],
      )
    ).rows.map((row) => row.id);
  return { big: await pick(BIG_OWNER), small: await pick(SMALL_OWNER) };
}

/**
 * Each read measured on the daemon and then at once on the baseline (the machine's speed drifts
 * within a run: measured one server after the other, the daemon's by-id rate, taken first, read
 * 0.71x at 1M and 1.04x at 3M in one run); the load runs (autocannon) in the order daemon,
 * baseline, baseline, daemon, each server's two runs combined (combine()), so that a drift during
 * the pair, or going first, weighs on both alike (one day's runs put the by-id ratio, daemon
 * first, at 0.76x to 0.96x); then what only the daemon has (menu?as_of, ingress).
 */
async function measureReads({ bases, duration, asOf, ids, webhookKey, only, daemonPeak }) {
  const at = encodeURIComponent(asOf);
  const cycle = (paths) => {
    let n = 0;
    return () => paths[n++ % paths.length];
  };
  const out = { daemon: {}, baseline: {} };
  const measure = async (name, how, servers = ['daemon', 'baseline']) => {
    if (only !== undefined && !only.includes(name)) return;
    for (const server of servers) {
      out[server][name] = withoutRaw(await how(bases[server]));
      progress(server, out[server], name, server === 'daemon' ? daemonPeak() : undefined);
    }
  };
  const compare = async (name, how) => {
    if (only !== undefined && !only.includes(name)) return;
    const runs = { daemon: [], baseline: [] };
    for (const server of ['daemon', 'baseline', 'baseline', 'daemon']) {
      const run = await how(bases[server]);
      runs[server].push(run);
      progress(server, { [name]: run }, name, server === 'daemon' ? daemonPeak() : undefined);
    }
    out.daemon[name] = combine(runs.daemon);
    out.baseline[name] = combine(runs.baseline);
  };
  await compare('liveId', (base) =>
    cannon({ base, duration, connections: 10, path: cycle(ids.big.map((id) => `/api/v1/products/${id}`)) }),
  );
  await compare('livePage', (base) =>
    cannon({ base, duration, connections: 10, path: () => `/api/v1/products?owner_id=${BIG_OWNER}&limit=100` }),
  );
  await compare('asOfId', (base) =>
    cannon({
      base,
      duration,
      connections: 10,
      path: cycle(ids.small.map((id) => `/api/v1/products/${id}?as_of=${at}`)),
    }),
  );
  await compare('asOfPage', (base) =>
    cannon({
      base,
      duration,
      connections: 10,
      path: () => `/api/v1/products?owner_id=${SMALL_OWNER}&limit=100&as_of=${at}`,
    }),
  );
  // One client at a time: what a read costs, rather than how ten of them queue for two cores.
  await compare('asOfId1', (base) =>
    cannon({
      base,
      duration,
      connections: 1,
      path: cycle(ids.small.map((id) => `/api/v1/products/${id}?as_of=${at}`)),
    }),
  );
  await compare('asOfPage1', (base) =>
    cannon({
      base,
      duration,
      connections: 1,
      path: () => `/api/v1/products?owner_id=${SMALL_OWNER}&limit=100&as_of=${at}`,
    }),
  );
  // The first read builds the body (the daemon then keeps it while the owner's menu is unchanged).
  await measure('menu2kFirst', (base) => timed(1, async () => get(`${base}/api/v1/menu?owner_id=${SMALL_OWNER}`)));
  // Through node:http, as get() reads every body: autocannon's own parser took ~350 ms to take in a
  // 24 MB body that curl reads in ~50 ms, so its figure was the client's.
  await measure('menu2k', (base) => timed(20, async () => get(`${base}/api/v1/menu?owner_id=${SMALL_OWNER}`)));
  await measure('menu2kBytes', async (base) => (await get(`${base}/api/v1/menu?owner_id=${SMALL_OWNER}`)).bytes);
  await compare('notModified', async (base) => {
    const etag = (await get(`${base}/api/v1/menu?owner_id=${SMALL_OWNER}`)).etag;
    return cannon({
      base,
      duration,
      connections: 10,
      path: () => `/api/v1/menu?owner_id=${SMALL_OWNER}`,
      headers: { 'if-none-match': etag },
    });
  });
  await measure('menu10k', (base) => timed(3, async () => get(`${base}/api/v1/menu?owner_id=${BIG_OWNER}`)));
  await measure('menu10kNormalized', (base) =>
    timed(2, async () => get(`${base}/api/v1/menu?owner_id=${BIG_OWNER}&form=normalized`)),
  );
  const daemonOnly = ['daemon'];
  await measure(
    'menuAsOf',
    (base) => timed(3, async () => get(`${base}/api/v1/menu?owner_id=${SMALL_OWNER}&as_of=${at}`)),
    daemonOnly,
  );
  if (only !== undefined && !only.includes('ingressBusy')) return out;
  // While /menu of 10,000 products is built again and again: /health/live and ingress answer as when idle.
  await measure(
    'healthIdle',
    (base) => cannon({ base, duration, connections: 1, path: () => '/health/live' }),
    daemonOnly,
  );
  const nextBody = eventBodies();
  const ingress = (base) =>
    cannon({
      base,
      duration,
      connections: 10,
      method: 'POST',
      path: () => `/webhooks/${webhookKey}`,
      body: nextBody,
      headers: { 'content-type': 'application/json' },
    });
  await measure('ingressIdle', ingress, daemonOnly);
  const heavy = heavyMenuReads(`${bases.daemon}/api/v1/menu?owner_id=${BIG_OWNER}`, 2);
  await sleep(300);
  await measure(
    'healthBusy',
    (base) => cannon({ base, duration, connections: 1, path: () => '/health/live' }),
    daemonOnly,
  );
  await measure('ingressBusy', ingress, daemonOnly);
  await measure('heavyMenus', () => heavy.stop(), daemonOnly);
  return out;
}

/** One line per measurement, so a run that fails shows where. */
function progress(server, out, name, peakMiB) {
  const value = out[name];
  const summary =
    value === null || typeof value !== 'object'
      ? value
      : 'rps' in value
        ? `${value.rps} req/s, p99 ${value.p99} ms`
        : 'ms' in value
          ? `${value.ms.join(' / ')} ms`
          : '';
  log(`    ${server} ${name}: ${summary}${peakMiB === undefined ? '' : ` (peak RSS so far ${peakMiB} MiB)`}`);
}

/**
 * `workers` loops of GET url until stopped, in a worker thread (receiving 93 MB bodies back to
 * back must not slow the event loop that autocannon measures ingress on); how many completed.
 */
function heavyMenuReads(url, workers) {
  const worker = new Worker(new URL(import.meta.url), { workerData: { heavyMenuReads: { url, workers } } });
  const done = new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return {
    stop: async () => {
      worker.postMessage('stop');
      const completed = await done;
      await worker.terminate();
      return completed;
    },
  };
}

if (!isMainThread && workerData?.heavyMenuReads) {
  const { url, workers } = workerData.heavyMenuReads;
  let stopped = false;
  let completed = 0;
  parentPort.once('message', () => {
    stopped = true;
  });
  const loops = Array.from({ length: workers }, async () => {
    while (!stopped) {
      await get(url);
      completed++;
    }
  });
  Promise.all(loops).then(() => parentPort.postMessage(completed));
}

/**
 * GET url, counting the body's bytes as they arrive (node:http, nothing kept): fetch's
 * arrayBuffer() of a 93 MB body took ~1 s of the client's own time, which the figures are not about.
 */
function get(url, headers = {}) {
  const started = performance.now();
  const failed = (error, what = '') =>
    new Error(`GET ${url}: ${error.message} after ${Math.round(performance.now() - started)} ms${what}`);
  return new Promise((resolve, reject) => {
    const request = httpGet(url, { headers, timeout: 120_000 }, (response) => {
      let bytes = 0;
      response.on('data', (chunk) => {
        bytes += chunk.length;
      });
      response.on('error', (error) => reject(failed(error, ' (reading the body)')));
      response.on('end', () => {
        if (response.statusCode !== 200) reject(new Error(`GET ${url}: ${response.statusCode}`));
        else resolve({ bytes, etag: response.headers.etag ?? null });
      });
    });
    request.on('timeout', () => request.destroy(new Error('timed out')));
    request.on('error', (error) => reject(failed(error)));
  });
}

/** `times` requests one after another: each one's ms, the slowest, and p50/p99 by nearest rank (of 20, the p99 is the slowest). */
async function timed(times, fn) {
  const ms = [];
  let bytes = 0;
  for (let i = 0; i < times; i++) {
    const started = performance.now();
    bytes = (await fn()).bytes;
    ms.push(round(performance.now() - started, 1));
  }
  const sorted = [...ms].sort((a, b) => a - b);
  const rank = (p) => sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
  return { ms, max: Math.max(...ms), p50: rank(50), p99: rank(99), bytes };
}

async function cannon({ base, duration, amount, connections, path, method = 'GET', body, headers = {} }) {
  // A second of the same requests first, not counted, for either server: JIT, pooled connections
  // and (the daemon's as_of statements) prepared statements settle before the measured run.
  if (duration !== undefined && method === 'GET') {
    await autocannon({
      url: base,
      connections,
      duration: 1,
      pipelining: 1,
      timeout: 30,
      headers,
      requests: [{ setupRequest: (request) => ({ ...request, path: path() }) }],
    });
  }
  // Unaggregated, so that combine() can merge the latency histograms of two runs.
  const raw = await autocannon({
    url: base,
    connections,
    ...(amount ? { amount } : { duration }),
    pipelining: 1,
    timeout: 30,
    method,
    headers,
    skipAggregateResult: true,
    requests: [{ setupRequest: (request) => ({ ...request, path: path(), ...(body ? { body: body() } : {}) }) }],
  });
  const bad = raw.non2xx - (headers['if-none-match'] ? (raw['3xx'] ?? 0) : 0);
  // A server answering errors fast is not a fast server: such a figure would mean nothing.
  if (bad > 0 || raw.errors + raw.timeouts > 0) {
    throw new Error(
      `${base}: ${bad} answers not 2XX and ${raw.errors + raw.timeouts} errors out of ${raw.totalRequests} requests`,
    );
  }
  const { latency } = autocannon.aggregateResult([raw], { url: base, connections });
  return {
    rps: Math.round(raw.totalCompletedRequests / raw.duration),
    p50: latency.p50,
    p99: latency.p99,
    max: latency.max,
    requests: raw.totalCompletedRequests,
    errors: raw.errors + raw.timeouts,
    non2xx: bad,
    raw,
  };
}

/** A measure as the results keep it: a load run without its encoded histograms. */
function withoutRaw(value) {
  if (value === null || typeof value !== 'object' || !('raw' in value)) return value;
  const { raw: _, ...rest } = value;
  return rest;
}

/** Two load runs of one server as one: the mean rate, and the percentiles of all their requests (autocannon merges the histograms). */
function combine(runs) {
  const total = (key) => runs.reduce((sum, run) => sum + run[key], 0);
  const { latency } = autocannon.aggregateResult(
    runs.map((run) => run.raw),
    { url: 'http://127.0.0.1', connections: 1 },
  );
  return {
    rps: Math.round(total('rps') / runs.length),
    p50: latency.p50,
    p99: latency.p99,
    max: latency.max,
    requests: total('requests'),
    errors: total('errors'),
    non2xx: total('non2xx'),
    runs: runs.map((run) => run.rps),
  };
}

async function explains(client, asOf, ids) {
  await client.query('SET jit = off');
  const plans = {};
  const explain = async (name, sql, params) => {
    const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${sql}`, params);
    plans[name] = `-- ${name}\n${sql.trim()}\n\n${rows.map((row) => row['QUERY PLAN']).join('\n')}\n`;
  };
  // The as_of statements as the daemon runs them: prepared, on a session that plans them generically
  // (EXECUTE takes its arguments as literals: a utility statement has no bound parameters).
  const literal = (value) =>
    typeof value === 'number'
      ? String(value)
      : client.escapeLiteral(
          value instanceof Date
            ? value.toISOString()
            : Array.isArray(value)
              ? `{${value.map((item) => JSON.stringify(String(item))).join(',')}}`
              : String(value),
        );
  const explainPrepared = async (name, sql, params) => {
    await client.query(`PREPARE explained AS ${sql}`);
    try {
      await client.query(`SET plan_cache_mode = force_generic_plan`);
      const { rows } = await client.query(
        `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE explained(${params.map(literal).join(', ')})`,
      );
      plans[name] =
        `-- ${name} (prepared, generic plan: plan_cache_mode = force_generic_plan, as the daemon runs it)\n${sql.trim()}\n\n` +
        `${rows.map((row) => row['QUERY PLAN']).join('\n')}\n`;
    } finally {
      await client.query('DEALLOCATE explained');
      await client.query('RESET plan_cache_mode');
    }
  };
  const page = await asOfStatement({ ownerId: SMALL_OWNER, limit: 100, asOf: new Date(asOf) });
  await explainPrepared('as-of-page', page.sql, page.params);
  const byId = await asOfStatement({ ids: [ids.small[0]], includeDeleted: true, asOf: new Date(asOf) });
  await explainPrepared('as-of-by-id', byId.sql, byId.params);
  for (const form of ['expanded', 'normalized']) {
    for (const section of menuSections(form)) {
      await explain(`menu-${form}-${section.key}`, section.sql, [SMALL_OWNER]);
      if (section.traits !== undefined) {
        // The lookup of the first chunk's traits (the daemon fetches products 200 at a time).
        const { rows } = await client.query(`${section.sql} LIMIT 200`, [SMALL_OWNER]);
        await explain(`menu-${form}-${section.key}-traits`, section.traits, [
          [...new Set(rows.flatMap((row) => row.traits))],
        ]);
      }
    }
  }
  await explain('menu-version', `SELECT version FROM proj_menu.owner_versions WHERE owner_id = $1`, [SMALL_OWNER]);
  return plans;
}

function writeExplains(size, plans) {
  const dir = join(HERE, 'explain');
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(plans)) writeFileSync(join(dir, `${name}.${size}.txt`), text);
  log(`  EXPLAIN snapshots written to bench/explain/*.${size}.txt`);
}

function tables(size, { daemon, baseline }) {
  const met = (ok) => (ok ? 'met' : 'NOT met');
  const ratio = (a, b) => `${round(a / Math.max(1, b), 2)}x`;
  // The mean rate of a server's two runs, each run's after it (combine()).
  const rate = (result) => (result.runs === undefined ? result.rps : `${result.rps} (${result.runs.join(' / ')})`);
  const row = (label, d, b) => [label, rate(d), d.p50, d.p99, rate(b), b.p50, b.p99];
  return [
    {
      title: `query ${size}: daemon vs bare node:http + pg (same SQL), autocannon, runs in the order daemon, baseline, baseline, daemon`,
      columns: ['read', 'daemon req/s', 'p50 ms', 'p99 ms', 'baseline req/s', 'p50 ms', 'p99 ms'],
      rows: [
        row('live by id (10 conn)', daemon.liveId, baseline.liveId),
        row('live page of 100, 10k owner (10 conn)', daemon.livePage, baseline.livePage),
        row('as_of by id (10 conn)', daemon.asOfId, baseline.asOfId),
        row('as_of page of 100 (10 conn)', daemon.asOfPage, baseline.asOfPage),
        row('as_of by id (1 conn)', daemon.asOfId1, baseline.asOfId1),
        row('as_of page of 100 (1 conn)', daemon.asOfPage1, baseline.asOfPage1),
        row('/menu 304 (10 conn)', daemon.notModified, baseline.notModified),
      ],
    },
    {
      title: `query ${size}: single requests (ms each)`,
      columns: ['read', 'daemon', 'baseline'],
      rows: [
        [
          '/menu 2,000 products, first read (built)',
          daemon.menu2kFirst.ms.join(' / '),
          baseline.menu2kFirst.ms.join(' / '),
        ],
        [
          `/menu 2,000 products, ${Math.round(daemon.menu2kBytes / 1e5) / 10} MB, 20 reads: p50 / p99`,
          `${daemon.menu2k.p50} / ${daemon.menu2k.p99}`,
          `${baseline.menu2k.p50} / ${baseline.menu2k.p99}`,
        ],
        [
          `/menu 10,000 products, ${Math.round(daemon.menu10k.bytes / 1e5) / 10} MB`,
          daemon.menu10k.ms.join(' / '),
          baseline.menu10k.ms.join(' / '),
        ],
        [
          `/menu 10,000 products normalized, ${Math.round(daemon.menu10kNormalized.bytes / 1e5) / 10} MB`,
          daemon.menu10kNormalized.ms.join(' / '),
          baseline.menu10kNormalized.ms.join(' / '),
        ],
        ['/menu?as_of 2,000 products', daemon.menuAsOf.ms.join(' / '), '-'],
      ],
    },
    {
      title: `query ${size}: the event loop under heavy reads (daemon; 2 clients reading /menu of 10,000 products in a loop, ${daemon.heavyMenus} read)`,
      columns: ['measure', 'idle p99 ms', 'during p99 ms', 'ratio', 'req/s idle', 'req/s during'],
      rows: [
        [
          'POST /webhooks (10 conn)',
          daemon.ingressIdle.p99,
          daemon.ingressBusy.p99,
          ratio(daemon.ingressBusy.p99, daemon.ingressIdle.p99),
          daemon.ingressIdle.rps,
          daemon.ingressBusy.rps,
        ],
        [
          'GET /health/live (1 conn)',
          daemon.healthIdle.p99,
          daemon.healthBusy.p99,
          ratio(daemon.healthBusy.p99, daemon.healthIdle.p99),
          daemon.healthIdle.rps,
          daemon.healthBusy.rps,
        ],
      ],
    },
    {
      title: `query ${size}: targets`,
      columns: ['measure', 'value', 'target', 'result'],
      rows: [
        [
          '/menu 2,000 p99 ms (after the first read)',
          daemon.menu2k.p99,
          `< ${TARGET.menu2kP99Ms}`,
          met(daemon.menu2k.p99 < TARGET.menu2kP99Ms),
        ],
        [
          '/menu 10,000 ms (slowest of 3)',
          daemon.menu10k.max,
          `< ${TARGET.menu10kMs}`,
          met(daemon.menu10k.max < TARGET.menu10kMs),
        ],
        [
          '304 req/s at 10 conn',
          daemon.notModified.rps,
          `>= ${TARGET.notModifiedRps}`,
          met(daemon.notModified.rps >= TARGET.notModifiedRps),
        ],
        [
          '304 p99 ms',
          daemon.notModified.p99,
          `< ${TARGET.notModifiedP99Ms}`,
          met(daemon.notModified.p99 < TARGET.notModifiedP99Ms),
        ],
        [
          'as_of page of 100 p99 ms, 1 conn',
          daemon.asOfPage1.p99,
          `< ${TARGET.asOfP99Ms}`,
          met(daemon.asOfPage1.p99 < TARGET.asOfP99Ms),
        ],
        [
          'as_of by id p99 ms, 1 conn',
          daemon.asOfId1.p99,
          `< ${TARGET.asOfP99Ms}`,
          met(daemon.asOfId1.p99 < TARGET.asOfP99Ms),
        ],
        [
          'as_of page of 100 p99 ms, 10 conn',
          daemon.asOfPage.p99,
          `< ${TARGET.asOfP99Ms}`,
          met(daemon.asOfPage.p99 < TARGET.asOfP99Ms),
        ],
        [
          'as_of by id p99 ms, 10 conn',
          daemon.asOfId.p99,
          `< ${TARGET.asOfP99Ms}`,
          met(daemon.asOfId.p99 < TARGET.asOfP99Ms),
        ],
        [
          'menu?as_of 2,000 ms (slowest of 3)',
          daemon.menuAsOf.max,
          `< ${TARGET.menuAsOfMs}`,
          met(daemon.menuAsOf.max < TARGET.menuAsOfMs),
        ],
        [
          'live by id req/s vs baseline',
          ratio(daemon.liveId.rps, baseline.liveId.rps),
          `>= ${TARGET.liveRatio}x`,
          met(daemon.liveId.rps >= TARGET.liveRatio * baseline.liveId.rps),
        ],
        [
          'live page req/s vs baseline',
          ratio(daemon.livePage.rps, baseline.livePage.rps),
          `>= ${TARGET.liveRatio}x`,
          met(daemon.livePage.rps >= TARGET.liveRatio * baseline.livePage.rps),
        ],
        [
          'ingress p99 during heavy /menu vs idle',
          ratio(daemon.ingressBusy.p99, daemon.ingressIdle.p99),
          `<= ${TARGET.ingressRatio}x`,
          met(daemon.ingressBusy.p99 <= TARGET.ingressRatio * Math.max(1, daemon.ingressIdle.p99)),
        ],
        [
          'daemon peak RSS (VmHWM) MiB',
          daemon.peakRssMiB,
          `< ${TARGET.rssMiB}`,
          met(daemon.peakRssMiB < TARGET.rssMiB),
        ],
      ],
    },
  ];
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const round = (value, digits) => Math.round(value * 10 ** digits) / 10 ** digits;
const log = (line) => process.stderr.write(`${line}\n`);

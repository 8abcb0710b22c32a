// Fan-out benchmark: what N consumers, each following one store, cost the daemon at a steady
// delivery rate, now that each process reads each change-log page once and routes the changes by
// owner (src/changes/change-router.service.ts, docs/design.md "Fan-out").
//
// One daemon (and one fresh database) per N:
//   http: N http sinks, sink i following store-i (owner_ids: [store-i]), plus 10 http sinks
//         following every store and one postgres table sink, all created through POST /api/v1/sinks
//         (from "now"); their target is ONE receiver process (bench/lib/fanout-receiver.js), each
//         sink's URL naming its store (/r/store-i, /all/k).
//   sse:  N SSE clients, client i on GET /api/v1/changes?owner_id=store-i (text/event-stream), plus
//         one following every store, in one process of their own (bench/lib/fanout-sse-clients.js).
// Then: settle -> quiet interval (idle CPU of the daemon and of its database's backends) -> paced load
// of product.updated deliveries (`--rate`/s, each of a new product of a random one of the N stores)
// for `--warmup` + `--duration` s -> wait until every consumer has every change -> figures.
// Beside it, bench/baseline-server.js on a fresh database, paced the same (its PostgreSQL CPU per delivery).
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { admin, cloneDatabase, createMigratedDatabase, databaseUrl, dropDatabase } from './lib/database.js';
import { waitForQuiet } from './lib/cpu.js';
import { scanLog } from './lib/logs.js';
import { createPostgresTarget } from './lib/postgres-target.js';
import { freePort, memoryOf, startService, stopService, waitReady } from './lib/processes.js';
import { sinkBenchEnv } from './lib/sink-changes.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const KEY = `bench_fanout_${randomBytes(12).toString('hex')}`;
/** Sinks following every store beside the N per-store ones (http runs). */
const ALL_STORE_SINKS = 10;
/** POST /api/v1/sinks in flight at once while the N sinks are made. */
const CREATE_CONCURRENCY = 16;
/** After the load, how long the bench waits for the last changes to reach every consumer. */
const DRAIN_MS = 30_000;
const SCHEMA = 'menu_sync';

export const description =
  'fan-out: N http sinks / N SSE clients of one store each at a paced delivery rate: CPU per delivery, idle cost, latency, missing, RSS, sink creation, /metrics size; vs the bare baseline';
export const defaults = { duration: 60, warmup: 5, quietWait: 10, idle: 30, rate: 200 };

const SIZES = { http: [1, 100, 1000, 10_000], sse: [1, 1000, 10_000] };
/** Issue targets, printed beside the figures (not asserted). */
const TARGET = {
  cpuGrowth: 1.5,
  p99Ms: 250,
  idlePctOfCore: 5,
  create10kSeconds: 60,
  rssMiB: 600,
  pgVsBaseline: 2,
  idleKiBPerConsumer: 20,
};

export let ticksPerSecond = 100;
try {
  ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  // keep the usual 100
}

export async function run({
  only,
  sizes,
  duration = defaults.duration,
  warmup = defaults.warmup,
  quietWait = defaults.quietWait,
  idle = defaults.idle,
  rate = defaults.rate,
  logDir,
}) {
  mkdirSync(logDir, { recursive: true });
  const parts = only ?? ['http', 'sse', 'baseline'];
  if (sizes?.some((n) => !Number.isInteger(n) || n < 1))
    throw new Error('fanout --sizes takes positive integers, e.g. 1,100');
  const unknown = parts.filter((part) => !['http', 'sse', 'baseline'].includes(part));
  if (unknown.length > 0) throw new Error(`fanout --only takes http, sse, baseline; not ${unknown.join(', ')}`);
  const env = sinkBenchEnv({ WEBHOOK_KEYS: KEY, LOG_LEVEL: 'warn' });
  const template = await createMigratedDatabase({ cwd: ROOT, env, suffix: 'fanout' });
  const bench = { env, template, logDir, duration, warmup, quietWait, idle, rate };
  const runs = [];
  let baseline = null;
  try {
    for (const mode of ['http', 'sse']) {
      if (!parts.includes(mode)) continue;
      for (const n of sizes ?? SIZES[mode]) {
        log(`${mode} N=${n}`);
        const result = await measure(bench, mode, n);
        runs.push(result);
        log(`${mode} N=${n}: ${oneLine(result)}`);
        for (const problem of result.problems) log(`  WARNING ${mode} N=${n}: ${problem}`);
      }
    }
    if (parts.includes('baseline')) {
      log('baseline');
      baseline = await measureBaseline(bench);
      log(`baseline: pg ${baseline.pgUsPerDelivery} µs/delivery, server ${baseline.serverUsPerDelivery} µs/delivery`);
    }
  } finally {
    await dropDatabase(template);
  }
  return {
    settings: {
      rate,
      durationSeconds: duration,
      warmupSeconds: warmup,
      idleSeconds: idle,
      allStoreSinks: ALL_STORE_SINKS,
      createConcurrency: CREATE_CONCURRENCY,
      daemon:
        'node dist/src/main.js serve (LOG_LEVEL=warn, RECONCILE_CRON=off, SINK_ALLOWED_NETWORKS=127.0.0.0/8,::1/128; defaults otherwise)',
      baseline: 'bench/baseline-server.js (node:http, pg.Pool max 10, one INSERT per request)',
      cpu: 'from /proc: the daemon process, and the backends of its database (pg_stat_activity.datname), idle cost subtracted',
    },
    runs,
    baseline,
    tables: tables(runs, baseline, rate),
  };
}

// ---------------------------------------------------------------------------------------------
// One run: a daemon with N consumers.

async function measure(bench, mode, n) {
  const database = await cloneDatabase(bench.template, `${mode}_${n}`);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const logFile = join(bench.logDir, `fanout-${mode}-${n}.log`);
  const daemon = startService('node', ['dist/src/main.js', 'serve'], {
    cwd: ROOT,
    env: { ...bench.env, DATABASE_URL: databaseUrl(database), PORT: String(port) },
    logFile,
  });
  const cleanup = [];
  try {
    await waitReady(daemon, `${base}/health/ready`, 60_000);
    const fds = openFileLimit(daemon.pid);
    const consumers =
      mode === 'http' ? await httpConsumers(bench, base, n, cleanup) : await sseConsumers(bench, base, n, cleanup);
    const helperFds = openFileLimit(consumers.pid);
    // Let the new consumers settle (leases, lag gauges, first reads): longer for more of them.
    await sleep(3000 + Math.ceil(n / 1000) * 1000);
    // What the N consumers hold when nothing happens (peak RSS, under load, adds what the load holds).
    const idleMemory = memoryOf(daemon.pid);
    const busyBeforePct =
      bench.quietWait > 0 ? await waitForQuiet({ maxWaitMs: bench.quietWait * 1000, thresholdPct: 15 }) : null;
    // The quiet interval: what N consumers cost when nothing happens.
    const idleSample = await sampleCpu({ daemon: daemon.pid, helper: consumers.pid }, [database]);
    await sleep(bench.idle * 1000);
    const idleCpu = await idleSample();
    log(
      `  idle ${idleCpu.seconds} s: daemon ${idleCpu.pct.daemon} %, pg ${idleCpu.pct.pg} % of a core (${mode === 'http' ? 'receiver' : 'clients'} ${idleCpu.pct.helper} %)`,
    );
    const load = await pacedLoad({
      base,
      path: `/webhooks/${KEY}`,
      stores: n,
      rate: bench.rate,
      warmup: bench.warmup,
      duration: bench.duration,
      sample: () => sampleCpu({ daemon: daemon.pid, helper: consumers.pid }, [database], consumers.targetDatabase),
      drain: (accepted) => consumers.waitFor(accepted),
    });
    const arrivals = await consumers.arrivals();
    const metrics = await (await fetch(`${base}/metrics`)).text();
    // Kept beside the log: the sinks' delivery histograms, pool and lag gauges, for a closer look.
    writeFileSync(join(bench.logDir, `fanout-${mode}-${n}.metrics.txt`), metrics);
    const memory = memoryOf(daemon.pid);
    const tableRows = consumers.tableRows
      ? await consumers.tableRows(load.accepted.map((d) => String(d.productId)))
      : null;
    const stopped = await stopService(daemon);
    const logs = scanLog(logFile);
    const result = summarize({
      mode,
      n,
      rate: bench.rate,
      load,
      idleCpu,
      arrivals,
      tableRows,
      creation: consumers.creation,
      memory,
      idleMemory,
      metrics,
      metricsBytes: Buffer.byteLength(metrics),
      leasedAtEnd: gauge(metrics, 'menu_sync_sinks_leased'),
      busyBeforePct,
      fds: { daemon: fds, helper: helperFds },
      logs,
      logFile,
      stopped,
    });
    return result;
  } catch (error) {
    error.message += ` (fanout ${mode} N=${n}; log: ${logFile})`;
    throw error;
  } finally {
    await stopService(daemon);
    for (const step of cleanup.reverse()) await step().catch((error) => log(`  cleanup: ${error.message}`));
    await dropDatabase(database);
  }
}

/** The receiver, the PostgreSQL target, the 10 all-store sinks and the table sink, then the N per-store sinks (timed). */
async function httpConsumers(bench, base, n, cleanup) {
  const receiverPort = await freePort();
  const receiverUrl = `http://127.0.0.1:${receiverPort}`;
  const receiver = startService('node', [join(HERE, 'lib/fanout-receiver.js')], {
    env: { ...process.env, PORT: String(receiverPort) },
    logFile: join(bench.logDir, `fanout-receiver-${n}.log`),
  });
  cleanup.push(() => stopService(receiver));
  await waitReady(receiver, `${receiverUrl}/stats`);
  const target = await createPostgresTarget(['product']);
  cleanup.push(() => target.drop());
  for (let k = 0; k < ALL_STORE_SINKS; k++)
    await createSink(base, { kind: 'http', url: `${receiverUrl}/all/${k}`, types: ['product'], from: 'now' });
  await createSink(base, { kind: 'postgres', url: target.url, schema: SCHEMA, types: ['product'], from: 'now' });
  const started = performance.now();
  const postMs = new Array(n);
  const retries = await pool(n, CREATE_CONCURRENCY, async (i) => {
    const sent = performance.now();
    const retried = await createSink(base, {
      kind: 'http',
      url: `${receiverUrl}/r/store-${i}`,
      owner_ids: [`store-${i}`],
      types: ['product'],
      from: 'now',
    });
    postMs[i] = performance.now() - sent;
    return retried;
  });
  const createSeconds = (performance.now() - started) / 1000;
  const total = n + ALL_STORE_SINKS + 1;
  const leasedSeconds = await waitLeased(base, total, started);
  const post = postTimes(postMs);
  log(
    `  ${n} sinks created in ${round(createSeconds, 2)} s (${retries} retried; POST p50 ${post.p50Ms} ms, p99 ${post.p99Ms} ms, ` +
      `first tenth ${post.firstTenthMeanMs} ms, last tenth ${post.lastTenthMeanMs} ms), all ${total} leased after ${round(leasedSeconds, 2)} s`,
  );
  const stats = async () => (await fetch(`${receiverUrl}/stats`)).json();
  return {
    pid: receiver.pid,
    targetDatabase: [target.database],
    creation: { what: 'sinks', count: n, seconds: createSeconds, retries, leasedSeconds, post },
    allConsumers: ALL_STORE_SINKS,
    /** Until every accepted delivery reached its store's sink, every all-store sink and the table, or DRAIN_MS. */
    async waitFor(accepted) {
      const ids = accepted.map((d) => String(d.productId));
      const deadline = Date.now() + DRAIN_MS;
      for (;;) {
        const s = await stats();
        const allDone =
          Object.keys(s.allUnique).length === ALL_STORE_SINKS &&
          Object.values(s.allUnique).every((v) => v >= ids.length);
        if (s.storeUnique >= ids.length && allDone && (await tableCount(target, ids)) >= ids.length) return true;
        if (Date.now() > deadline) return false;
        await sleep(100);
      }
    },
    arrivals: async () => (await fetch(`${receiverUrl}/arrivals`)).json(),
    tableRows: (ids) => tableCount(target, ids),
  };
}

async function tableCount(target, ids, attempt = 1) {
  try {
    const rows = await target.rows(`SELECT count(*)::int AS n FROM ${SCHEMA}.products WHERE id = ANY($1)`, [ids]);
    return rows[0].n;
  } catch (error) {
    if (error.code === '42P01' || error.code === '3F000') return 0; // not created yet
    // The shared server is full for a moment (others' tests): again shortly.
    if (error.code === '53300' && attempt < 20) {
      await sleep(250);
      return tableCount(target, ids, attempt + 1);
    }
    throw error;
  }
}

/** The N SSE clients (and one of every store) from the head of the change log, in a process of their own (connecting timed). */
async function sseConsumers(bench, base, n, cleanup) {
  const head = await fetch(`${base}/api/v1/products?limit=1`);
  await head.arrayBuffer();
  const cursor = head.headers.get('x-changes-cursor');
  if (!cursor) throw new Error('the daemon answered no X-Changes-Cursor: cannot follow the change feed from its head');
  const controlPort = await freePort();
  const control = `http://127.0.0.1:${controlPort}`;
  const started = performance.now();
  const clients = startService('node', [join(HERE, 'lib/fanout-sse-clients.js')], {
    env: { ...process.env, BASE: base, N: String(n), AFTER: cursor, ALL: '1', CONTROL_PORT: String(controlPort) },
    logFile: join(bench.logDir, `fanout-sse-clients-${n}.log`),
  });
  cleanup.push(() => stopService(clients));
  await waitReady(clients, `${control}/stats`);
  const stats = async () => (await fetch(`${control}/stats`)).json();
  const deadline = Date.now() + 300_000;
  for (;;) {
    const s = await stats();
    if (s.connected === n + 1) break;
    // A first attempt that failed (answered 503, a reset) is tried again by the client after 1 s.
    if (Date.now() > deadline)
      throw new Error(
        `${s.connected} of ${n + 1} SSE clients connected after 300 s (${s.failed} failed first: ${s.firstError})`,
      );
    await sleep(100);
  }
  const connectSeconds = (performance.now() - started) / 1000;
  const { failed, firstError, reconnects: reconnectsAtStart } = await stats();
  log(
    `  ${n + 1} SSE clients connected in ${round(connectSeconds, 2)} s${failed > 0 ? ` (${failed} failed first and connected again: ${firstError})` : ''}`,
  );
  return {
    pid: clients.pid,
    targetDatabase: [],
    creation: { what: 'SSE connections', count: n + 1, seconds: connectSeconds, retries: failed, leasedSeconds: null },
    allConsumers: 1,
    async waitFor(accepted) {
      const deadline = Date.now() + DRAIN_MS;
      for (;;) {
        const s = await stats();
        if (s.storeUnique >= accepted.length && s.allUnique >= accepted.length) return true;
        if (Date.now() > deadline) return false;
        await sleep(100);
      }
    },
    arrivals: async () => {
      const a = await (await fetch(`${control}/arrivals`)).json();
      // Reconnections after every client was connected (those of the connecting are in creation.retries).
      return { ...a, all: { 0: a.all }, reconnects: a.reconnects - reconnectsAtStart };
    },
    tableRows: null,
  };
}

/**
 * How long each POST /api/v1/sinks took (ms): percentiles, and the mean of the first and of the last
 * tenth made (a cost growing with the sinks already there shows as last > first).
 */
function postTimes(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const tenth = Math.max(1, Math.floor(values.length / 10));
  const mean = (list) => round(list.reduce((a, b) => a + b, 0) / list.length, 1);
  return {
    p50Ms: round(percentile(sorted, 50), 1),
    p99Ms: round(percentile(sorted, 99), 1),
    maxMs: round(sorted.at(-1), 1),
    firstTenthMeanMs: mean(values.slice(0, tenth)),
    lastTenthMeanMs: mean(values.slice(-tenth)),
  };
}

/** POST /api/v1/sinks (again after a 503, at most 5 times); the number of retries. */
export async function createSink(base, body) {
  for (let attempt = 1; ; attempt++) {
    const response = await fetch(`${base}/api/v1/sinks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    });
    const json = await response.json();
    if (response.status === 201) return attempt - 1;
    if (response.status !== 503 || attempt === 5)
      throw new Error(`POST /api/v1/sinks: ${response.status} ${JSON.stringify(json)}`);
    await sleep(500);
  }
}

/** Runs task(0..n-1) `concurrency` at a time; the sum of what they return. */
export async function pool(n, concurrency, task) {
  let next = 0;
  let sum = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, concurrency) }, async () => {
      while (next < n) sum += await task(next++);
    }),
  );
  return sum;
}

/** Seconds from `started` until the daemon delivers `count` sinks (menu_sync_sinks_leased). */
async function waitLeased(base, count, started) {
  const deadline = Date.now() + 180_000;
  for (;;) {
    const leased = gauge(await (await fetch(`${base}/metrics`)).text(), 'menu_sync_sinks_leased');
    if (leased >= count) return (performance.now() - started) / 1000;
    if (Date.now() > deadline) throw new Error(`the daemon leased ${leased} of ${count} sinks after 180 s`);
    await sleep(200);
  }
}

// ---------------------------------------------------------------------------------------------
// The load: product.updated deliveries, paced, each of a new product of a random store.

const DESCRIPTION =
  'Slow-roasted pulled pork shoulder in a brioche bun with house slaw, pickles and smoked chipotle mayo. '.repeat(20);

/** A product.updated delivery like bench/lib/events.js's (~2.7 KB), of product `productId` of `owner`. */
export function productUpdated(productId, owner, seq) {
  const id = String(productId);
  return JSON.stringify({
    data: {
      id: randomUUID(),
      type: 'webhook_event',
      attributes: {
        id: seq,
        created_at: new Date().toISOString(),
        event_type: 'product.updated',
        uri: 'https://menu-sync.example/webhooks/key',
      },
      relationships: {
        subject: { data: { id, type: 'product' } },
        resource_owner: { data: { id: owner, type: 'user' } },
      },
    },
    included: [
      {
        id,
        type: 'product',
        attributes: {
          id: productId,
          title: `Fan-out product ${id}`,
          description: DESCRIPTION,
          available: true,
          base_cost: { GBP: { cents: 850, format: '£8.50', currency: { iso_code: 'GBP' } } },
        },
        relationships: {
          traits: { data: [{ id: '7', type: 'trait' }] },
          externally_managed_product_override: { data: null },
        },
      },
    ],
  });
}

/** A small seeded generator (mulberry32): the same stores in the same order on every run. */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const now = () => performance.timeOrigin + performance.now();

/**
 * `rate` deliveries a second on schedule for warmup + duration seconds; CPU sampled from the end of
 * the warm-up until every change reached every consumer (or the drain timed out). With stores = 0,
 * the owner is one store (the baseline).
 */
async function pacedLoad({ base, path, stores, rate, warmup, duration, sample, drain }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const url = new URL(base);
  const pick = random(42);
  const warmups = Math.round(rate * warmup);
  const total = warmups + Math.round(rate * duration);
  const deliveries = [];
  const post = (body) =>
    new Promise((resolve, reject) => {
      const request = http.request(
        {
          host: url.hostname,
          port: url.port,
          path,
          method: 'POST',
          agent,
          timeout: 30_000,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (response) => {
          response.resume();
          response.on('end', () => resolve(response.statusCode));
          response.on('error', reject);
        },
      );
      request.on('timeout', () => request.destroy(new Error('POST timed out')));
      request.on('error', reject);
      request.end(body);
    });
  async function deliver(k) {
    const store = stores > 0 ? Math.floor(pick() * stores) : 0;
    const productId = 1_000_000 + k;
    const record = {
      k,
      store,
      productId,
      warmup: k < warmups,
      status: null,
      sentAt: now(),
      acceptedAt: null,
      error: null,
    };
    deliveries.push(record);
    try {
      record.status = await post(productUpdated(productId, `store-${store}`, k + 1));
      record.acceptedAt = now();
    } catch (error) {
      record.error = error.message;
    }
  }
  const interval = 1000 / rate;
  const pending = [];
  let finishCpu = null;
  const start = performance.now();
  const selfStart = process.cpuUsage();
  for (let k = 0; k < total; k++) {
    if (k === warmups) finishCpu = await sample();
    const due = start + k * interval;
    const wait = due - performance.now();
    if (wait >= 1) await sleep(wait);
    pending.push(deliver(k));
  }
  const sendSeconds = (performance.now() - start) / 1000;
  await Promise.all(pending);
  const accepted = deliveries.filter((d) => d.status === 202);
  const drained = await drain(accepted);
  const cpu = await finishCpu({ commitsAfterMs: 11_000 });
  const self = process.cpuUsage(selfStart);
  agent.destroy();
  return {
    deliveries,
    accepted,
    measured: deliveries.filter((d) => !d.warmup),
    sendSeconds,
    achievedRate: round(deliveries.length / sendSeconds, 1),
    drained,
    cpu,
    loadGeneratorPct: round(((self.user + self.system) / 1e6 / sendSeconds) * 100, 1),
  };
}

// ---------------------------------------------------------------------------------------------
// CPU from /proc: the daemon, its database's PostgreSQL backends (those found at the start and any
// that appeared by the end), a helper process (receiver / SSE clients), the table sink's target
// database's backends, the machine.

export function processTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}

function machineTicks() {
  const [, ...values] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
  const numbers = values.map(Number);
  return { total: numbers.reduce((a, b) => a + b, 0), idle: numbers[3] + (numbers[4] ?? 0) };
}

/**
 * admin(), tried again for a few seconds when the server is full ("too many clients": the machine's
 * PostgreSQL is shared with others' tests, and max_connections is small).
 */
async function adminRetrying(sql, params) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await admin(sql, params);
    } catch (error) {
      if (error.code !== '53300' || attempt === 20) throw error;
      await sleep(250);
    }
  }
}

async function backends(databases) {
  if (databases.length === 0) return [];
  const { rows } = await adminRetrying(
    `SELECT pid FROM pg_stat_activity WHERE datname = ANY($1) AND pid <> pg_backend_pid()`,
    [databases],
  );
  return rows.map((row) => row.pid);
}

async function sampleCpu(processes, databases, targetDatabases = []) {
  const ticksOf = (pids) => new Map(pids.map((pid) => [pid, processTicks(pid) ?? 0]));
  const start = {
    at: performance.now(),
    processes: Object.fromEntries(Object.entries(processes).map(([name, pid]) => [name, processTicks(pid) ?? 0])),
    pg: ticksOf(await backends(databases)),
    target: ticksOf(await backends(targetDatabases)),
    machine: machineTicks(),
    commits: await commits(databases),
  };
  /**
   * commitsAfterMs: read the commit counter that much later. PostgreSQL 15 backends report their
   * counts at most once a second, and one that went idle within 10 s: read at once, the last second
   * of a load is missing.
   */
  return async ({ commitsAfterMs = 0 } = {}) => {
    const seconds = (performance.now() - start.at) / 1000;
    const used = async (before, dbs) => {
      const pids = new Set([...before.keys(), ...(await backends(dbs))]);
      let ticks = 0;
      for (const pid of pids) {
        const now = processTicks(pid);
        // A backend that ended meanwhile: its ticks are lost (rare: the daemon's pools keep theirs).
        if (now !== null) ticks += now - (before.get(pid) ?? 0);
      }
      return { seconds: ticks / ticksPerSecond, backends: pids.size };
    };
    const pg = await used(start.pg, databases);
    const target = await used(start.target, targetDatabases);
    const cpuSeconds = Object.fromEntries(
      Object.entries(processes).map(([name, pid]) => [
        name,
        ((processTicks(pid) ?? start.processes[name]) - start.processes[name]) / ticksPerSecond,
      ]),
    );
    cpuSeconds.pg = pg.seconds;
    cpuSeconds.target = target.seconds;
    const machine = machineTicks();
    const total = machine.total - start.machine.total;
    const busyCores = total > 0 ? (1 - (machine.idle - start.machine.idle) / total) * cpus().length : NaN;
    const pct = Object.fromEntries(Object.entries(cpuSeconds).map(([k, v]) => [k, round((v / seconds) * 100, 1)]));
    const ours = Object.values(cpuSeconds).reduce((a, b) => a + b, 0);
    // Transactions committed in the database (pg_stat_database.xact_commit), over commitsSeconds.
    if (commitsAfterMs > 0) await sleep(commitsAfterMs);
    const committed = (await commits(databases)) - start.commits;
    const commitsSeconds = (performance.now() - start.at) / 1000;
    return {
      seconds: round(seconds, 1),
      cpuSeconds,
      pct,
      pgBackends: pg.backends,
      commits: committed,
      commitsSeconds: round(commitsSeconds, 1),
      machineBusyPct: round((busyCores / cpus().length) * 100, 1),
      // Everything else (others' tests, this load generator, the kernel), % of one core.
      otherPct: Math.max(0, round(busyCores * 100 - (ours / seconds) * 100, 0)),
    };
  };
}

async function commits(databases) {
  if (databases.length === 0) return 0;
  const { rows } = await adminRetrying(
    `SELECT coalesce(sum(xact_commit), 0)::bigint AS n FROM pg_stat_database WHERE datname = ANY($1)`,
    [databases],
  );
  return Number(rows[0].n);
}

/** The soft limit on open files of a process (node raises its own to the hard limit at start). */
function openFileLimit(pid) {
  try {
    const line = readFileSync(`/proc/${pid}/limits`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line.split(/\s{2,}/)[1];
    return soft === 'unlimited' ? Infinity : Number(soft);
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// The baseline: the bare server on a fresh database, paced the same.

async function measureBaseline(bench) {
  const database = await cloneDatabase(bench.template, 'baseline');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const logFile = join(bench.logDir, 'fanout-baseline.log');
  const server = startService('node', [join(HERE, 'baseline-server.js')], {
    cwd: ROOT,
    env: { ...bench.env, DATABASE_URL: databaseUrl(database), PORT: String(port), WEBHOOK_KEY: KEY, POOL_SIZE: '10' },
    logFile,
  });
  try {
    await waitReady(server, `${base}/health/ready`);
    await sleep(1000);
    if (bench.quietWait > 0) await waitForQuiet({ maxWaitMs: bench.quietWait * 1000, thresholdPct: 15 });
    const idleSeconds = Math.min(bench.idle, 10);
    const idleSample = await sampleCpu({ daemon: server.pid }, [database]);
    await sleep(idleSeconds * 1000);
    const idleCpu = await idleSample();
    const load = await pacedLoad({
      base,
      path: `/webhooks/${KEY}`,
      stores: 1,
      rate: bench.rate,
      warmup: bench.warmup,
      duration: bench.duration,
      sample: () => sampleCpu({ daemon: server.pid }, [database]),
      drain: async () => true,
    });
    const perDelivery = perDeliveryUs(load, idleCpu);
    return {
      idleCpu,
      cpu: load.cpu,
      deliveries: load.deliveries.length,
      accepted: load.accepted.length,
      achievedRate: load.achievedRate,
      pgUsPerDelivery: perDelivery.pg,
      serverUsPerDelivery: perDelivery.daemon,
      commitsPerDelivery: perDelivery.commits,
      peakRssMiB: round(memoryOf(server.pid).peakRssMiB, 1),
    };
  } finally {
    await stopService(server);
    await dropDatabase(database);
  }
}

// ---------------------------------------------------------------------------------------------
// Figures.

/** CPU µs per measured delivery accepted, the idle cost over the same seconds taken out. */
function perDeliveryUs(load, idleCpu) {
  const measured = load.measured.filter((d) => d.status === 202).length;
  const net = (name) => {
    const idlePerSecond = idleCpu.cpuSeconds[name] / idleCpu.seconds;
    return Math.max(0, load.cpu.cpuSeconds[name] - idlePerSecond * load.cpu.seconds);
  };
  const us = (name) => (measured > 0 ? Math.round((net(name) / measured) * 1e6) : null);
  const idleCommitsPerSecond = idleCpu.commits / idleCpu.seconds;
  const commitsPerDelivery =
    measured > 0
      ? round(Math.max(0, load.cpu.commits - idleCommitsPerSecond * load.cpu.commitsSeconds) / measured, 2)
      : null;
  return {
    daemon: us('daemon'),
    pg: us('pg'),
    helper: us('helper'),
    target: us('target'),
    commits: commitsPerDelivery,
  };
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function latencies(deliveries, arrivalsById) {
  const values = [];
  let missing = 0;
  for (const d of deliveries) {
    const at = arrivalsById[String(d.productId)];
    if (at === undefined) missing++;
    else values.push(Math.max(0, at - d.acceptedAt));
  }
  values.sort((a, b) => a - b);
  return { values, missing };
}

function summarize({
  mode,
  n,
  rate,
  load,
  idleCpu,
  arrivals,
  tableRows,
  creation,
  memory,
  idleMemory,
  metrics,
  metricsBytes,
  leasedAtEnd,
  busyBeforePct,
  fds,
  logs,
  logFile,
  stopped,
}) {
  const measuredAccepted = load.measured.filter((d) => d.status === 202);
  // Latency over the measured deliveries; missing over every accepted one (the warm-up's too).
  const store = latencies(measuredAccepted, arrivals.store);
  const storeMissing = latencies(load.accepted, arrivals.store).missing;
  const allSinks = Object.keys(arrivals.all);
  const allValues = [];
  let allMissing = 0;
  for (const k of allSinks) {
    allValues.push(...latencies(measuredAccepted, arrivals.all[k]).values);
    allMissing += latencies(load.accepted, arrivals.all[k]).missing;
  }
  const expectedAll = mode === 'http' ? ALL_STORE_SINKS : 1;
  allMissing += (expectedAll - allSinks.length) * load.accepted.length;
  allValues.sort((a, b) => a - b);
  const ms = (value) => (value === null ? null : round(value, 1));
  const perDelivery = perDeliveryUs(load, idleCpu);
  const statuses = load.deliveries.reduce(
    (c, d) => ({ ...c, [d.status ?? 'error']: (c[d.status ?? 'error'] ?? 0) + 1 }),
    {},
  );
  const result = {
    mode,
    n,
    rate,
    creation: {
      ...creation,
      seconds: round(creation.seconds, 2),
      leasedSeconds: creation.leasedSeconds === null ? null : round(creation.leasedSeconds, 2),
    },
    deliveries: load.deliveries.length,
    accepted: load.accepted.length,
    statuses,
    achievedRate: load.achievedRate,
    drained: load.drained,
    idle: {
      seconds: idleCpu.seconds,
      daemonPct: idleCpu.pct.daemon,
      pgPct: idleCpu.pct.pg,
      totalPct: round(idleCpu.pct.daemon + idleCpu.pct.pg, 1),
      helperPct: idleCpu.pct.helper,
      otherPct: idleCpu.otherPct,
    },
    cpu: load.cpu,
    cpuUsPerDelivery: perDelivery,
    loadGeneratorPct: load.loadGeneratorPct,
    store: {
      p50Ms: ms(percentile(store.values, 50)),
      p99Ms: ms(percentile(store.values, 99)),
      maxMs: ms(store.values.at(-1) ?? null),
      missing: storeMissing,
    },
    allStore: {
      consumers: expectedAll,
      p50Ms: ms(percentile(allValues, 50)),
      p99Ms: ms(percentile(allValues, 99)),
      maxMs: ms(allValues.at(-1) ?? null),
      missing: allMissing,
    },
    table: tableRows === null ? null : { rows: tableRows, missing: load.accepted.length - tableRows },
    missing: storeMissing + allMissing + (tableRows === null ? 0 : load.accepted.length - tableRows),
    misrouted: arrivals.misrouted,
    firstMisrouted: arrivals.firstMisrouted,
    duplicates: arrivals.duplicates,
    batches: arrivals.batches ?? null,
    receiverConnections: arrivals.connections ?? null,
    httpPostMeanMs: histogramMeanMs(metrics, 'menu_sync_sinks_delivery_seconds', 'kind="http"'),
    sseReconnects: arrivals.reconnects ?? null,
    peakRssMiB: round(memory.peakRssMiB, 1),
    idleRssMiB: round(idleMemory.rssMiB, 1),
    metricsBytes,
    leasedAtEnd,
    busyBeforePct,
    openFileLimits: fds,
    logWarnings: logs.warnings,
    logErrors: logs.errors,
    firstLogProblem: logs.first,
    logFile,
    exit: stopped,
  };
  result.bySecond = bySecond(load, arrivals);
  result.problems = problems(result);
  return result;
}

/** Per second of the load (by send time, the warm-up's included): where the slow ones cluster. */
function bySecond(load, arrivals) {
  const start = Math.min(...load.deliveries.map((d) => d.sentAt));
  const seconds = new Map();
  for (const d of load.accepted) {
    const second = Math.floor((d.sentAt - start) / 1000);
    if (!seconds.has(second)) seconds.set(second, []);
    seconds.get(second).push(d);
  }
  return [...seconds]
    .sort(([a], [b]) => a - b)
    .map(([second, deliveries]) => {
      const store = latencies(deliveries, arrivals.store).values;
      const all = Object.values(arrivals.all)
        .flatMap((seen) => latencies(deliveries, seen).values)
        .sort((a, b) => a - b);
      return {
        second,
        warmup: deliveries.some((d) => d.warmup),
        deliveries: deliveries.length,
        storeP99Ms: round(percentile(store, 99) ?? NaN, 1),
        allStoreP99Ms: round(percentile(all, 99) ?? NaN, 1),
      };
    });
}

function problems(r) {
  const out = [];
  if (r.accepted < r.deliveries)
    out.push(`only ${r.accepted} of ${r.deliveries} deliveries answered 202: ${JSON.stringify(r.statuses)}`);
  if (r.missing > 0)
    out.push(
      `${r.missing} changes missing (store consumers ${r.store.missing}, all-store ${r.allStore.missing}${r.table ? `, table ${r.table.missing}` : ''}) ${DRAIN_MS / 1000} s after the load`,
    );
  if (r.misrouted > 0)
    out.push(`${r.misrouted} changes reached a consumer of another store: ${JSON.stringify(r.firstMisrouted)}`);
  if (r.sseReconnects > 0) out.push(`${r.sseReconnects} SSE reconnections`);
  if (r.logErrors + r.logWarnings > 0)
    out.push(`${r.logErrors} errors, ${r.logWarnings} warnings logged (${r.logFile}): ${r.firstLogProblem}`);
  if (r.cpu.otherPct > 25) out.push(`other processes used ${r.cpu.otherPct} % of a core during the load: noisy`);
  if (r.achievedRate < 0.95 * r.rate)
    out.push(`the load fell behind its pace: ${r.achievedRate} of ${r.rate} deliveries/s`);
  const needed = r.n + 200;
  for (const [who, limit] of Object.entries(r.openFileLimits))
    if (limit !== null && limit < needed)
      out.push(`${who}'s open-file limit ${limit} is below ~${needed} (raise ulimit -Hn)`);
  if (r.exit?.signal === 'SIGKILL') out.push('the daemon did not stop on SIGTERM within 12 s');
  return out;
}

function oneLine(r) {
  return (
    `daemon ${r.cpuUsPerDelivery.daemon} µs/del, pg ${r.cpuUsPerDelivery.pg} µs/del, idle ${r.idle.totalPct} % of a core, ` +
    `store p50/p99/max ${r.store.p50Ms}/${r.store.p99Ms}/${r.store.maxMs} ms, all-store ${r.allStore.p50Ms}/${r.allStore.p99Ms}/${r.allStore.maxMs} ms, ` +
    `missing ${r.missing}, RSS ${r.peakRssMiB} MiB, ${r.creation.what} ${r.creation.seconds} s, /metrics ${r.metricsBytes} B, other ${r.cpu.otherPct} %`
  );
}

function tables(runs, baseline, rate) {
  const out = [];
  for (const mode of ['http', 'sse']) {
    const rows = runs.filter((r) => r.mode === mode);
    if (rows.length === 0) continue;
    const first = rows.find((r) => r.n === 1) ?? rows[0];
    const vs = (value, of) => (value === null || !of ? '-' : `${round(value / of, 2)}x`);
    out.push({
      title:
        mode === 'http'
          ? `fanout http: N sinks of one store each + ${ALL_STORE_SINKS} all-store http sinks + 1 postgres table sink, ${rate} deliveries/s (CPU per delivery: idle subtracted; xN=1 and x baseline: PostgreSQL)`
          : `fanout sse: N SSE clients of one store each + 1 all-store client, ${rate} deliveries/s (CPU per delivery: idle subtracted; xN=1 and x baseline: PostgreSQL)`,
      columns: [
        'N',
        'pg µs/del',
        'daemon µs/del',
        'pg xN=1',
        'daemon xN=1',
        'pg x baseline',
        'idle % core (pg+daemon)',
        'commits/del',
        'store p50/p99/max ms',
        'all-store p50/p99/max ms',
        'missing',
        'peak RSS MiB',
        'idle RSS MiB',
        'idle KiB/consumer vs N=1',
        mode === 'http' ? 'create N sinks s' : 'connect N+1 s',
        ...(mode === 'http' ? ['table target pg µs/del'] : []),
        '/metrics B',
        ...(mode === 'http' ? ['POSTs (conns)', 'POST mean ms'] : []),
        mode === 'http' ? 'receiver %' : 'clients %',
        'other %',
      ],
      rows: rows.map((r) => [
        r.n,
        r.cpuUsPerDelivery.pg,
        r.cpuUsPerDelivery.daemon,
        vs(r.cpuUsPerDelivery.pg, first.cpuUsPerDelivery.pg),
        vs(r.cpuUsPerDelivery.daemon, first.cpuUsPerDelivery.daemon),
        baseline ? vs(r.cpuUsPerDelivery.pg, baseline.pgUsPerDelivery) : '-',
        `${r.idle.totalPct} (${r.idle.pgPct}+${r.idle.daemonPct})`,
        r.cpuUsPerDelivery.commits,
        `${r.store.p50Ms}/${r.store.p99Ms}/${r.store.maxMs}`,
        `${r.allStore.p50Ms}/${r.allStore.p99Ms}/${r.allStore.maxMs}`,
        r.missing + (r.misrouted > 0 ? ` (+${r.misrouted} misrouted)` : ''),
        r.peakRssMiB,
        r.idleRssMiB,
        r === first ? '-' : idleKiBPerConsumer(r, first),
        r.creation.seconds,
        ...(mode === 'http' ? [r.cpuUsPerDelivery.target] : []),
        r.metricsBytes,
        ...(mode === 'http' ? [`${r.batches} (${r.receiverConnections})`, r.httpPostMeanMs] : []),
        r.cpu.pct.helper,
        r.cpu.otherPct,
      ]),
    });
  }
  if (baseline)
    out.push({
      title: `fanout baseline: bench/baseline-server.js paced at ${rate} deliveries/s (one INSERT per delivery)`,
      columns: [
        'pg µs/del',
        'server µs/del',
        'commits/del',
        '202',
        'achieved /s',
        'idle % core (pg+server)',
        'other %',
      ],
      rows: [
        [
          baseline.pgUsPerDelivery,
          baseline.serverUsPerDelivery,
          baseline.commitsPerDelivery,
          `${baseline.accepted}/${baseline.deliveries}`,
          baseline.achievedRate,
          round(baseline.idleCpu.pct.daemon + baseline.idleCpu.pct.pg, 1),
          baseline.cpu.otherPct,
        ],
      ],
    });
  out.push(targetsTable(runs, baseline));
  return out;
}

/** The issue's targets at the largest N measured of each mode (10,000 in the full run), not asserted. */
function targetsTable(runs, baseline) {
  const rows = [];
  const mark = (ok) => (ok === null ? '-' : ok ? 'met' : 'NOT met');
  for (const mode of ['http', 'sse']) {
    const mine = runs.filter((r) => r.mode === mode);
    if (mine.length === 0) continue;
    const first = mine.find((r) => r.n === 1);
    const last = mine.reduce((a, b) => (b.n > a.n ? b : a));
    const at = `${mode} N=${last.n}`;
    const growth = (name, key) => {
      if (!first || first === last)
        return [at, `${name} CPU/delivery ≤ ${TARGET.cpuGrowth}x N=1`, '-', 'needs N=1 and a larger N'];
      const x = last.cpuUsPerDelivery[key] / first.cpuUsPerDelivery[key];
      return [
        at,
        `${name} CPU/delivery ≤ ${TARGET.cpuGrowth}x N=1`,
        `${round(x, 2)}x (${last.cpuUsPerDelivery[key]} vs ${first.cpuUsPerDelivery[key]} µs)`,
        mark(x <= TARGET.cpuGrowth),
      ];
    };
    rows.push(growth('PostgreSQL', 'pg'), growth('daemon', 'daemon'));
    const p99 = Math.max(last.store.p99Ms ?? Infinity, last.allStore.p99Ms ?? Infinity);
    rows.push([
      at,
      `p99 < ${TARGET.p99Ms} ms (store and all-store)`,
      `${last.store.p99Ms} / ${last.allStore.p99Ms} ms`,
      mark(p99 < TARGET.p99Ms),
    ]);
    rows.push([
      at,
      `idle cost < ${TARGET.idlePctOfCore} % of a core`,
      `${last.idle.totalPct} %`,
      mark(last.idle.totalPct < TARGET.idlePctOfCore),
    ]);
    if (mode === 'http')
      rows.push([
        at,
        `creating 10,000 sinks < ${TARGET.create10kSeconds} s`,
        `${last.creation.seconds} s for ${last.n}`,
        last.n >= 10_000
          ? mark(last.creation.seconds < TARGET.create10kSeconds)
          : last.n >= 100
            ? `(${round((last.creation.seconds / last.n) * 10_000, 1)} s at that rate)`
            : '(too few to tell)',
      ]);
    rows.push([
      at,
      `peak RSS < ${TARGET.rssMiB} MB`,
      `${last.peakRssMiB} MiB`,
      mark(last.peakRssMiB * 1.048576 < TARGET.rssMiB),
    ]);
    rows.push(
      !first || first === last
        ? [at, `idle memory ≤ ${TARGET.idleKiBPerConsumer} KiB per consumer`, '-', 'needs N=1 and a larger N']
        : [
            at,
            `idle memory ≤ ${TARGET.idleKiBPerConsumer} KiB per consumer`,
            `${idleKiBPerConsumer(last, first)} KiB (idle RSS ${last.idleRssMiB} vs ${first.idleRssMiB} MiB)`,
            mark(idleKiBPerConsumer(last, first) <= TARGET.idleKiBPerConsumer),
          ],
    );
    rows.push([at, 'missing = 0', String(last.missing), mark(mine.every((r) => r.missing === 0))]);
    if (baseline) {
      const x = last.cpuUsPerDelivery.pg / baseline.pgUsPerDelivery;
      rows.push([
        at,
        `PostgreSQL CPU/delivery ≤ ${TARGET.pgVsBaseline}x baseline`,
        `${round(x, 2)}x (${last.cpuUsPerDelivery.pg} vs ${baseline.pgUsPerDelivery} µs)`,
        mark(x <= TARGET.pgVsBaseline),
      ]);
    }
  }
  return {
    title: 'fanout targets (issue; at N = 10,000 in the full run: here at the largest N measured; not asserted)',
    columns: ['run', 'target', 'value', 'status'],
    rows,
  };
}

/** The idle RSS a consumer adds: the growth from N = 1, over the consumers added. */
function idleKiBPerConsumer(r, first) {
  return round(((r.idleRssMiB - first.idleRssMiB) * 1024) / (r.n - first.n), 1);
}

/** The mean of a histogram's observations (ms) over the daemon's life, for the series with `labels`. */
function histogramMeanMs(text, name, labels) {
  const value = (part) => Number(new RegExp(`^${name}_${part}\\{${labels}\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  const count = value('count');
  return count > 0 ? round((value('sum') / count) * 1000, 1) : null;
}

function gauge(text, name) {
  const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return match ? Number(match[1]) : null;
}

function round(value, digits = 1) {
  const factor = 10 ** digits;
  return Math.round(Number(value) * factor) / factor;
}

function log(message) {
  process.stderr.write(`  ${new Date().toISOString().slice(11, 19)} ${message}\n`);
}

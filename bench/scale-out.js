// Scale-out benchmark (issue 33): each role's CPU cost per unit of work, measured on processes that
// hold one role each, then the capacity model built from those costs checked against the same mixed
// load run on (a) one all-role process and (b) three processes (`ingress,api` x2 on the replica and
// one `projector,sinks,reconcile` worker). CPU-ms per unit = the process's CPU time delta / units done
// (from /proc). Load is paced at fixed rates, so a prediction from unit costs x rates means something.
//
//   migrated database on the primary (it reaches the replica on 127.0.0.1:5433 through the WAL)
//   -> calibration: ingress | projector | sinks | api (304) | api (cached 200) | api (SSE feed), seven phases
//   -> check (a) all roles in one process, (b) the roles split in three; predicted vs measured CPU.
import { randomBytes } from 'node:crypto';
import { createServer, get } from 'node:http';
import { mkdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { Pool } from 'undici';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { admin, createMigratedDatabase, databaseUrl, dropDatabase, query } from './lib/database.js';
import { eventBodies } from './lib/events.js';
import { freePort, memoryOf, startService, stopService, waitReady } from './lib/processes.js';
import { sinkBenchEnv } from './lib/sink-changes.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const NATS_URL = process.env.BENCH_NATS_URL ?? 'nats://127.0.0.1:4222';
const REPLICA_URL = process.env.BENCH_READ_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5433/postgres';
const EVENTS_PER_S = Number(process.env.BENCH_SCALE_EVENTS ?? 10);
const READS_PER_S = Number(process.env.BENCH_SCALE_READS ?? 100);
/** Share of the check's reads that carry the current ETag (304); the others get the kept body (200). */
const NOT_MODIFIED_SHARE = 0.8;
const HTTP_SINKS = 50;
const OTHER_SINKS = 10;
const SSE_CLIENTS = 8;
const SINK_POOL_SIZE = 20;
const MENU_PRODUCTS = 100;
const KEY = 'bench-webhook-key-0123456789abcdef';
const READER = '7';

let ticksPerSecond = 100;
try {
  ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  // keep the usual 100
}

export const description =
  'scale-out: CPU per unit of each role, and the capacity model checked on one all-role process vs three role-split processes with the replica';
export const defaults = { duration: 30, warmup: 5, quietWait: 0 };

export async function run({ duration = defaults.duration, warmup = defaults.warmup, logDir }) {
  mkdirSync(logDir, { recursive: true });
  const env = sinkBenchEnv({ NATS_URL, WEBHOOK_KEYS: KEY });
  const database = await createMigratedDatabase({ cwd: ROOT, env, suffix: 'scale' });
  const target = `${database}_target`;
  await admin(`CREATE DATABASE ${target}`);
  const receiver = await startReceiver();
  const nc = await connect({ servers: NATS_URL });
  const jsm = await jetstreamManager(nc);
  const streams = [];
  const bench = { env, database, target, receiver, jsm, streams, logDir, duration, warmup, processes: [] };
  try {
    await waitForReplica(database);
    const calibration = await calibrate(bench);
    const checks = [];
    for (const layout of LAYOUTS) {
      log(`check: ${layout.name}`);
      checks.push(await check(bench, layout, calibration));
    }
    const sizes = await databaseSizes(database);
    return report({ calibration, checks, sizes, duration });
  } finally {
    for (const process of bench.processes) await stopService(process.child);
    for (const stream of streams) await jsm.streams.delete(stream).catch(() => undefined);
    await nc.close().catch(() => undefined);
    await receiver.close();
    await dropDatabase(database);
    await admin(`DROP DATABASE IF EXISTS ${target} WITH (FORCE)`);
  }
}

// ---------------------------------------------------------------------------------------------
// Calibration: one role per process, so each process's CPU is one role's.

async function calibrate(bench) {
  const withReplica = { DATABASE_READ_URL: replicaUrl(bench.database) };
  const [ingress, projector, sinks, etag, cached, feed] = await Promise.all([
    daemon(bench, 'ingress', 'ingress'),
    daemon(bench, 'projector', 'projector'),
    daemon(bench, 'sinks', 'sinks'),
    daemon(bench, 'api-304', 'api', withReplica),
    daemon(bench, 'api-cached', 'api', withReplica),
    daemon(bench, 'api-feed', 'api', withReplica),
  ]);
  log('calibration: six one-role processes ready; seeding the read menu');
  const menu = await seedMenu(ingress, etag);
  await sleep(2000);
  const idle = await measure(bench, [ingress, projector, sinks, etag, cached, feed], 5);
  const rss = { sinks: memoryOf(sinks.child.pid).rssMiB, feed: memoryOf(feed.child.pid).rssMiB };
  const httpSinks = await makeSinks(etag, sinks, HTTP_SINKS, () => httpSink(bench));
  await sleep(5000);
  const idleSinks = await measure(bench, [sinks], 5);
  const sinkRssMiB = (memoryOf(sinks.child.pid).rssMiB - rss.sinks) / HTTP_SINKS;
  const sse = await openFeed(feed, SSE_CLIENTS);
  await sleep(3000);
  const sseRssMiB = (memoryOf(feed.child.pid).rssMiB - rss.feed) / SSE_CLIENTS;
  const load = startLoad({
    webhooks: [ingress],
    reads: [
      { process: etag, share: NOT_MODIFIED_SHARE, etag: menu.etag },
      { process: cached, share: 1 - NOT_MODIFIED_SHARE },
    ],
  });
  try {
    await sleep(bench.warmup * 1000);
    const roles = [ingress, projector, sinks, etag, cached, feed];
    log('calibration: ingress, projector, http sinks, reads, feed');
    const http = await measure(bench, roles, bench.duration, { load, sse });
    await deleteSinks(etag, httpSinks);
    const natsSinks = await makeSinks(etag, sinks, OTHER_SINKS, () => natsSink(bench));
    await sleep(bench.warmup * 1000);
    log('calibration: nats sinks');
    const nats = await measure(bench, [sinks], bench.duration, { load, sinkIds: natsSinks, via: etag });
    await deleteSinks(etag, natsSinks);
    const pgSinks = await makeSinks(etag, sinks, OTHER_SINKS, (i) => postgresSink(bench, i));
    await sleep(bench.warmup * 1000);
    log('calibration: postgres table sinks');
    const table = await measure(bench, [sinks], bench.duration, { load, sinkIds: pgSinks, via: etag });
    await deleteSinks(etag, pgSinks);
    return unitCosts({ idle, idleSinks, http, nats, table, sinkRssMiB, sseRssMiB, menu });
  } finally {
    await load.stop();
    sse.close();
    for (const process of [ingress, projector, sinks, etag, cached, feed]) await stop(bench, process);
  }
}

/**
 * CPU-ms per unit; the process's idle CPU taken out first. An http sink's unit is a batch (a POST
 * answered), not a change: its work is per batch (a wake, a page read, the short batch's recorded
 * end, the POST, the cursor move), and how many changes a batch holds depends on how the projector's
 * pages fell, which differs between runs; per change, a run whose sinks caught up on a backlog in
 * larger batches looked cheaper than one at the head.
 */
function unitCosts({ idle, idleSinks, http, nats, table, sinkRssMiB, sseRssMiB, menu }) {
  const idleMsPerS = (name) => idle.cpuMs[name] / idle.seconds;
  const baseMsPerS = median(Object.keys(idle.cpuMs).map(idleMsPerS));
  const perSinkMsPerS = Math.max(0, (idleSinks.cpuMs.sinks / idleSinks.seconds - idleMsPerS('sinks')) / HTTP_SINKS);
  const net = (phase, name, sinks = 0) =>
    phase.cpuMs[name] - (idleMsPerS(name) + sinks * perSinkMsPerS) * phase.seconds;
  const costs = {
    ingress: net(http, 'ingress') / http.units.accepted.ingress,
    projector: net(http, 'projector') / http.units.projected,
    httpBatch: net(http, 'sinks') / http.units.httpBatches,
    natsSink: net(nats, 'sinks') / nats.units.sinkDelivered,
    tableSink: net(table, 'sinks') / table.units.sinkDelivered,
    notModified: net(http, 'api-304') / http.units.reads['api-304'],
    cachedMenu: net(http, 'api-cached') / http.units.reads['api-cached'],
    feedChange: net(http, 'api-feed') / http.units.feedChanges,
  };
  return {
    costs,
    baseMsPerS,
    perSinkMsPerS,
    sinkRssMiB,
    sseRssMiB,
    menuBytes: menu.bytes,
    pg: {
      primaryMsPerEvent: http.pgMs.primary / http.units.accepted.ingress,
      replicaMsPerRead: http.pgMs.replica / (http.units.reads['api-304'] + http.units.reads['api-cached']),
    },
    phases: { idle, idleSinks, http, nats, table },
  };
}

// ---------------------------------------------------------------------------------------------
// The check: the same mixed load on two layouts; the model's prediction next to the measurement.

const LAYOUTS = [
  { name: 'one process', processes: [{ name: 'all', roles: 'ingress,api,projector,sinks,reconcile,console' }] },
  {
    name: 'three processes',
    processes: [
      { name: 'api-1', roles: 'ingress,api' },
      { name: 'api-2', roles: 'ingress,api' },
      { name: 'worker', roles: 'projector,sinks,reconcile' },
    ],
  },
];

async function check(bench, layout, calibration) {
  const withReplica = { DATABASE_READ_URL: replicaUrl(bench.database) };
  const processes = await Promise.all(
    layout.processes.map(({ name, roles }) => daemon(bench, name, roles, withReplica)),
  );
  const front = processes.filter((process) => process.roles.includes('api'));
  const worker = processes.find((process) => process.roles.includes('sinks'));
  const menu = await menuOf(front[0]);
  const sinkIds = await makeSinks(front[0], worker, HTTP_SINKS, () => httpSink(bench));
  const load = startLoad({
    webhooks: front,
    reads: front.flatMap((process) => [
      { process, share: NOT_MODIFIED_SHARE / front.length, etag: menu.etag },
      { process, share: (1 - NOT_MODIFIED_SHARE) / front.length },
    ]),
  });
  try {
    await sleep(bench.warmup * 1000);
    const measured = await measure(bench, processes, bench.duration, { load, sinkIds, via: front[0] });
    await deleteSinks(front[0], sinkIds);
    return { layout: layout.name, ...predictAndCompare(processes, measured, calibration) };
  } finally {
    await load.stop();
    for (const process of processes) await stop(bench, process);
  }
}

/** Per process: fixed CPU + sum over its roles of unit cost x units it did, as % of one core. */
function predictAndCompare(processes, measured, { costs, baseMsPerS }) {
  const { units, seconds } = measured;
  const rows = processes.map((process) => {
    const has = (role) => process.roles.split(',').includes(role);
    const reads = units.readsByKind[process.name] ?? { notModified: 0, cached: 0 };
    const ms = {
      fixed: baseMsPerS * seconds,
      ingress: has('ingress') ? costs.ingress * (units.accepted[process.name] ?? 0) : 0,
      api: has('api') ? costs.notModified * reads.notModified + costs.cachedMenu * reads.cached : 0,
      projector: has('projector') ? costs.projector * units.projected : 0,
      sinks: has('sinks') ? costs.httpBatch * units.httpBatches : 0,
    };
    const predictedMs = Object.values(ms).reduce((a, b) => a + b, 0);
    const pct = (value) => round((value / seconds / 1000) * 100, 1);
    return {
      process: process.name,
      roles: process.roles,
      predictedPct: pct(predictedMs),
      byRolePct: Object.fromEntries(Object.entries(ms).map(([role, value]) => [role, pct(value)])),
      measuredPct: pct(measured.cpuMs[process.name]),
      errorPct: round(((measured.cpuMs[process.name] - predictedMs) / predictedMs) * 100, 1),
      rssMiB: round(memoryOf(process.child.pid).rssMiB, 0),
    };
  });
  return { rows, units, seconds, load: measured.load, pgMs: measured.pgMs, otherPct: measured.otherPct };
}

// ---------------------------------------------------------------------------------------------
// Measuring: CPU of the daemons and of the bench database's PostgreSQL backends, units done.

async function measure(bench, processes, seconds, { load, sse, sinkIds, via } = {}) {
  const pgPids = await backends(bench.database);
  const before = {
    at: performance.now(),
    ticks: Object.fromEntries(processes.map((p) => [p.name, ticks(p.child.pid)])),
    pg: { primary: sumTicks(pgPids.primary), replica: sumTicks(pgPids.replica) },
    machine: machineTicks(),
    load: load?.counts(),
    received: bench.receiver.count(),
    batches: bench.receiver.batches(),
    feed: sse?.count() ?? 0,
    projected: await projectedPosition(bench.database),
    sinks: sinkIds ? await sinkProgress(bench.database, via, sinkIds) : null,
  };
  const loadBefore = loadavg()[0];
  await sleep(seconds * 1000);
  const elapsed = (performance.now() - before.at) / 1000;
  const cpuMs = Object.fromEntries(
    processes.map((p) => [p.name, ((ticks(p.child.pid) - before.ticks[p.name]) / ticksPerSecond) * 1000]),
  );
  const pgMs = {
    primary: ((sumTicks(pgPids.primary) - before.pg.primary) / ticksPerSecond) * 1000,
    replica: ((sumTicks(pgPids.replica) - before.pg.replica) / ticksPerSecond) * 1000,
  };
  const machine = machineTicks();
  const busyCores = ((machine.busy - before.machine.busy) / ticksPerSecond) * 1;
  const oursMs = Object.values(cpuMs).reduce((a, b) => a + b, 0) + pgMs.primary + pgMs.replica;
  const counts = load?.counts();
  const units = {
    accepted: counts ? diffBy(counts.accepted, before.load.accepted) : {},
    reads: counts ? diffBy(counts.reads, before.load.reads) : {},
    readsByKind: counts ? diffKinds(counts.readsByKind, before.load.readsByKind) : {},
    failed: counts ? counts.failed - before.load.failed : 0,
    projected: (await projectedPosition(bench.database)) - before.projected,
    httpDelivered: bench.receiver.count() - before.received,
    httpBatches: bench.receiver.batches() - before.batches,
    feedChanges: (sse?.count() ?? 0) - before.feed,
    sinkDelivered: sinkIds ? (await sinkProgress(bench.database, via, sinkIds)) - before.sinks : 0,
  };
  return {
    seconds: elapsed,
    cpuMs,
    pgMs,
    units,
    load: { before: round(loadBefore, 2), after: round(loadavg()[0], 2) },
    otherPct: round(((busyCores * 1000 - oursMs) / elapsed / 1000) * 100, 0),
  };
}

/** The bench database's backends on the primary and on the replica (the daemons' pools, already open). */
async function backends(database) {
  const sql = `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`;
  const primary = (await admin(sql, [database])).rows.map((row) => row.pid);
  const client = new pg.Client({ connectionString: REPLICA_URL });
  await client.connect();
  try {
    const replica = (await client.query(sql, [database])).rows.map((row) => row.pid);
    return { primary, replica };
  } finally {
    await client.end();
  }
}

async function projectedPosition(database) {
  const { rows } = await query(database, 'SELECT applied AS p FROM proj_menu.checkpoint');
  return Number(rows[0].p);
}

/** Changes delivered by these sinks so far: their cursors' distance from the start, in changes. */
async function sinkProgress(database, via, sinkIds) {
  const { rows } = await query(database, 'SELECT count(*)::bigint AS n FROM change_log');
  const total = Number(rows[0].n);
  let lag = 0;
  for (const id of sinkIds) {
    const sink = await (await fetch(`${via.base}/api/v1/sinks/${id}`)).json();
    lag += Number(sink.lag ?? 0);
  }
  return total * sinkIds.length - lag;
}

function ticks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

const sumTicks = (pids) => pids.reduce((sum, pid) => sum + ticks(pid), 0);

function machineTicks() {
  const [, ...values] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
  const numbers = values.map(Number);
  return { busy: numbers.reduce((a, b) => a + b, 0) - numbers[3] - (numbers[4] ?? 0) };
}

// ---------------------------------------------------------------------------------------------
// Load: webhook deliveries and /menu reads at fixed rates, round-robin over the given processes.

function startLoad({ webhooks, reads }) {
  const uri = 'https://menu-sync.example/webhooks/key';
  const nextBody = eventBodies(uri);
  const pools = new Map();
  const poolOf = (process) => {
    if (!pools.has(process.base)) pools.set(process.base, new Pool(process.base, { connections: 16 }));
    return pools.get(process.base);
  };
  const counts = { accepted: {}, reads: {}, readsByKind: {}, failed: 0 };
  const bump = (map, key, by = 1) => (map[key] = (map[key] ?? 0) + by);
  const pacers = [
    pace(EVENTS_PER_S, (i) => {
      const process = webhooks[i % webhooks.length];
      return send(poolOf(process), { method: 'POST', path: `/webhooks/${KEY}`, body: nextBody() }, 202, () =>
        bump(counts.accepted, process.name),
      );
    }),
    pace(READS_PER_S, (i) => {
      const read = pickByShare(reads, i);
      const headers = read.etag ? { 'if-none-match': read.etag } : {};
      const path = `/api/v1/menu?owner_id=${READER}`;
      return send(poolOf(read.process), { method: 'GET', path, headers }, read.etag ? 304 : 200, () => {
        bump(counts.reads, read.process.name);
        const kinds = (counts.readsByKind[read.process.name] ??= { notModified: 0, cached: 0 });
        kinds[read.etag ? 'notModified' : 'cached']++;
      });
    }),
  ];
  async function send(pool, request, expected, onOk) {
    try {
      const headers = { ...(request.headers ?? {}) };
      if (request.body) headers['content-type'] = 'application/json';
      const response = await pool.request({ ...request, headers });
      await response.body.dump();
      if (response.statusCode === expected) onOk();
      else counts.failed++;
    } catch {
      counts.failed++;
    }
  }
  return {
    counts: () => structuredClone(counts),
    async stop() {
      await Promise.all(pacers.map((pacer) => pacer.stop()));
      await Promise.all([...pools.values()].map((pool) => pool.close()));
    },
  };
}

/** Deterministic spread of request i over the read kinds by their shares (a low-discrepancy sequence). */
function pickByShare(reads, i) {
  const x = (i * 0.6180339887) % 1;
  let sum = 0;
  for (const read of reads) {
    sum += read.share;
    if (x < sum) return read;
  }
  return reads.at(-1);
}

/** Calls send(i) `rate` times a second, on time, however long the answers take (at most 1,000 open). */
function pace(rate, send) {
  const started = performance.now();
  const open = new Set();
  let sent = 0;
  const timer = setInterval(() => {
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    while (sent < due && open.size < 1000) {
      const request = send(sent++);
      open.add(request);
      request.finally(() => open.delete(request));
    }
  }, 5);
  return {
    async stop() {
      clearInterval(timer);
      await Promise.allSettled([...open]);
    },
  };
}

/** SSE clients on the change feed from its head; counts the changes they receive. */
async function openFeed(process, clients) {
  const { cursor } = await menuOf(process);
  let received = 0;
  const requests = [];
  for (let i = 0; i < clients; i++) {
    const request = get(
      `${process.base}/api/v1/changes?after=${encodeURIComponent(cursor)}`,
      { headers: { accept: 'text/event-stream' }, agent: false },
      (response) => {
        let tail = '';
        response.setEncoding('utf8');
        // better-sse writes `event:change` (no space after the colon, as the SSE format allows);
        // this counted `event: change` before, and found none.
        response.on('data', (chunk) => {
          const text = tail + chunk;
          received += text.match(/^event: ?change\n/gm)?.length ?? 0;
          const end = text.lastIndexOf('change\n');
          tail = text.slice(Math.max(end === -1 ? 0 : end + 7, text.length - 16));
        });
      },
    );
    request.on('error', () => undefined);
    requests.push(request);
  }
  return { count: () => received, close: () => requests.forEach((request) => request.destroy()) };
}

// ---------------------------------------------------------------------------------------------
// Processes, sinks, the menu read, the replica.

async function daemon(bench, name, roles, extra = {}) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = startService('node', ['dist/src/main.js', 'serve'], {
    cwd: ROOT,
    env: {
      ...bench.env,
      DATABASE_URL: databaseUrl(bench.database),
      PORT: String(port),
      ROLES: roles,
      // 50 sink loops on the default pool of 10 waited past its 3 s connect timeout on a loaded machine.
      ...(roles.split(',').includes('sinks') ? { DATABASE_POOL_SIZE: String(SINK_POOL_SIZE) } : {}),
      ...extra,
    },
    logFile: join(bench.logDir, `scale-out-${name}.log`),
  });
  const process = { name, roles, base, child };
  bench.processes.push(process);
  await waitReady(child, `${base}/health/ready`, 180_000);
  return process;
}

async function stop(bench, process) {
  await stopService(process.child);
  bench.processes = bench.processes.filter((p) => p !== process);
}

/** MENU_PRODUCTS products of their own owner, delivered one by one, then read back through the replica. */
async function seedMenu(ingress, reader) {
  const next = eventBodies('https://menu-sync.example/webhooks/key', {
    owner: READER,
    firstSubject: 900_000,
    subjects: MENU_PRODUCTS,
  });
  for (let i = 0; i < MENU_PRODUCTS; i++) {
    const response = await fetch(`${ingress.base}/webhooks/${KEY}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: next(),
    });
    if (response.status !== 202) throw new Error(`seed delivery answered ${response.status}`);
  }
  const deadline = Date.now() + 60_000;
  for (;;) {
    const menu = await menuOf(reader);
    if (menu.products === MENU_PRODUCTS) return menu;
    if (Date.now() > deadline) throw new Error(`the menu shows ${menu.products} of ${MENU_PRODUCTS} products`);
    await sleep(200);
  }
}

async function menuOf(process) {
  const response = await fetch(`${process.base}/api/v1/menu?owner_id=${READER}`);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`/menu answered ${response.status}: ${text.slice(0, 200)}`);
  return {
    etag: response.headers.get('etag'),
    cursor: response.headers.get('x-changes-cursor'),
    servedBy: response.headers.get('x-served-by'),
    products: JSON.parse(text).products.length,
    bytes: Buffer.byteLength(text),
  };
}

function httpSink(bench) {
  return { kind: 'http', url: bench.receiver.url, from: 'now', types: ['product'] };
}

async function natsSink(bench) {
  const stream = `BENCH_SCALE_${randomBytes(3).toString('hex').toUpperCase()}`;
  bench.streams.push(stream);
  return { kind: 'nats', stream, subject_prefix: stream.toLowerCase(), from: 'now', types: ['product'] };
}

function postgresSink(bench, i) {
  const url = new URL(databaseUrl(bench.target));
  return { kind: 'postgres', url: url.toString(), schema: `sink_${i}`, from: 'now', types: ['product'] };
}

/** Creates n sinks through `api`, then waits until `dispatcher` leases them all. */
async function makeSinks(api, dispatcher, n, body) {
  const ids = [];
  for (let i = 0; i < n; i++) ids.push(await createSink(api, await body(i)));
  const deadline = Date.now() + 60_000;
  while ((await leased(dispatcher)) < n) {
    if (Date.now() > deadline) throw new Error(`${dispatcher.name} leased fewer than ${n} sinks after 60 s`);
    await sleep(200);
  }
  return ids;
}

/** POST /api/v1/sinks, again after a 503 (a busy pool), at most 5 times. */
async function createSink(api, body) {
  for (let attempt = 1; ; attempt++) {
    const response = await fetch(`${api.base}/api/v1/sinks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = await response.json();
    if (response.status === 201) return json.data.id;
    if (response.status !== 503 || attempt === 5)
      throw new Error(`POST /api/v1/sinks: ${response.status} ${JSON.stringify(json)}`);
    await sleep(1000);
  }
}

async function leased(process) {
  const text = await (await fetch(`${process.base}/metrics`)).text();
  // menu_sync_sink_leased{sink} shows only METRICS_SINK_SERIES sinks; the aggregate counts them all.
  return Number(/^menu_sync_sinks_leased (\S+)$/m.exec(text)?.[1] ?? 0);
}

async function deleteSinks(api, ids) {
  for (const id of ids) await fetch(`${api.base}/api/v1/sinks/${id}`, { method: 'DELETE' });
}

function replicaUrl(database) {
  const url = new URL(REPLICA_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

/** CREATE DATABASE and the migrations reach the replica through the WAL; wait until they did. */
async function waitForReplica(database) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const client = new pg.Client({ connectionString: replicaUrl(database) });
    try {
      await client.connect();
      const { rows } = await client.query(`SELECT to_regclass('event_log') IS NOT NULL AS ok`);
      if (rows[0].ok) return;
    } catch {
      // not there yet
    } finally {
      await client.end().catch(() => undefined);
    }
    if (Date.now() > deadline) throw new Error(`${database} has not reached the replica at ${REPLICA_URL}`);
    await sleep(200);
  }
}

/** Bytes per row of the log, the change log and the read model, for the PostgreSQL sizing. */
async function databaseSizes(database) {
  const size = async (table, countSql) => {
    const { rows } = await query(
      database,
      `SELECT (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('${table}'))::bigint AS bytes,
              (${countSql})::bigint AS n`,
    );
    return { bytes: Number(rows[0].bytes), rows: Number(rows[0].n), bytesPerRow: round(rows[0].bytes / rows[0].n, 0) };
  };
  return {
    eventLog: await size('event_log', 'SELECT count(*) FROM event_log'),
    changeLog: await size('change_log', 'SELECT count(*) FROM change_log'),
    products: await size('proj_menu.products', 'SELECT count(*) FROM proj_menu.products'),
  };
}

// ---------------------------------------------------------------------------------------------
// The receiver of the http sinks: a bare node:http server answering 204, counting changes and batches.

async function startReceiver() {
  let count = 0;
  let batches = 0;
  const server = createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      count += JSON.parse(Buffer.concat(chunks).toString('utf8')).data.length;
      batches++;
      response.writeHead(204).end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/hook`,
    count: () => count,
    batches: () => batches,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

// ---------------------------------------------------------------------------------------------
// The result.

function report({ calibration, checks, sizes, duration }) {
  const { costs } = calibration;
  const c = calibration.phases;
  const rate = (phase, units) => round(units / phase.seconds, 1);
  const costRows = [
    ['ingress: delivery acknowledged (202)', costs.ingress, rate(c.http, c.http.units.accepted.ingress), c.http],
    ['projector: event projected', costs.projector, rate(c.http, c.http.units.projected), c.http],
    ['http sink: batch delivered (a POST)', costs.httpBatch, rate(c.http, c.http.units.httpBatches), c.http],
    ['nats sink: change delivered', costs.natsSink, rate(c.nats, c.nats.units.sinkDelivered), c.nats],
    ['postgres table sink: change delivered', costs.tableSink, rate(c.table, c.table.units.sinkDelivered), c.table],
    ['api: /menu 304 (If-None-Match)', costs.notModified, rate(c.http, c.http.units.reads['api-304']), c.http],
    ['api: /menu 200 from the kept body', costs.cachedMenu, rate(c.http, c.http.units.reads['api-cached']), c.http],
    ['api: feed change sent to an SSE client', costs.feedChange, rate(c.http, c.http.units.feedChanges), c.http],
  ].map(([unit, ms, perS, phase]) => [unit, round(ms, 3), perS, phase.load.before, phase.otherPct]);
  const checkRows = checks.flatMap((run) =>
    run.rows.map((row) => [
      run.layout,
      row.process,
      row.roles,
      Object.entries(row.byRolePct)
        .filter(([, v]) => v > 0)
        .map(([k, v]) => `${k} ${v}`)
        .join(', '),
      row.predictedPct,
      row.measuredPct,
      `${row.errorPct > 0 ? '+' : ''}${row.errorPct}`,
      row.rssMiB,
      `${run.load.before}/${run.load.after}`,
      run.otherPct,
    ]),
  );
  return {
    settings: {
      eventsPerSecond: EVENTS_PER_S,
      readsPerSecond: READS_PER_S,
      notModifiedShare: NOT_MODIFIED_SHARE,
      httpSinks: HTTP_SINKS,
      otherSinks: OTHER_SINKS,
      sseClients: SSE_CLIENTS,
      menuProducts: MENU_PRODUCTS,
      seconds: duration,
      replica: REPLICA_URL.replace(/\/[^/]*$/, ''),
    },
    calibration,
    checks,
    sizes,
    tables: [
      {
        title: `Unit costs (one role per process, ${EVENTS_PER_S} deliveries/s, ${READS_PER_S} reads/s, ${duration} s per phase; idle CPU taken out)`,
        columns: ['unit', 'CPU-ms', 'units/s', 'load avg', 'other %'],
        rows: costRows,
      },
      {
        title: `Fixed costs, memory, PostgreSQL (sink processes with DATABASE_POOL_SIZE=${SINK_POOL_SIZE})`,
        columns: ['what', 'value'],
        rows: [
          ['idle process, CPU-ms/s (median of the six)', round(calibration.baseMsPerS, 2)],
          ['idle leased sink, CPU-ms/s per sink', round(calibration.perSinkMsPerS, 3)],
          ['memory per leased http sink, MiB', round(calibration.sinkRssMiB, 2)],
          ['memory per SSE client, MiB', round(calibration.sseRssMiB, 3)],
          ['kept /menu body, bytes', calibration.menuBytes],
          [
            'primary backends, CPU-ms per delivery (ingress+projector+50 sinks)',
            round(calibration.pg.primaryMsPerEvent, 3),
          ],
          ['replica backends, CPU-ms per /menu read', round(calibration.pg.replicaMsPerRead, 3)],
          ['event_log bytes per event', sizes.eventLog.bytesPerRow],
          ['change_log bytes per change', sizes.changeLog.bytesPerRow],
          ['products bytes per product', sizes.products.bytesPerRow],
        ],
      },
      {
        title: `Model check: ${EVENTS_PER_S} deliveries/s + ${READS_PER_S} /menu reads/s (${NOT_MODIFIED_SHARE * 100} % 304) + ${HTTP_SINKS} http sinks; CPU in % of one core (target: error within ±25 %)`,
        columns: [
          'layout',
          'process',
          'roles',
          'predicted by role',
          'predicted %',
          'measured %',
          'error %',
          'RSS MiB',
          'load avg',
          'other %',
        ],
        rows: checkRows,
      },
    ],
  };
}

function diffBy(after, before) {
  return Object.fromEntries(Object.entries(after).map(([key, value]) => [key, value - (before[key] ?? 0)]));
}

function diffKinds(after, before) {
  return Object.fromEntries(
    Object.entries(after).map(([key, kinds]) => [
      key,
      {
        notModified: kinds.notModified - (before[key]?.notModified ?? 0),
        cached: kinds.cached - (before[key]?.cached ?? 0),
      },
    ]),
  );
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

function log(message) {
  console.error(`  ${new Date().toISOString().slice(11, 19)} ${message}`);
}

function round(value, digits = 2) {
  const factor = 10 ** digits;
  return Math.round(Number(value) * factor) / factor;
}

// `ingress --with-sinks --freshness`: a daemon on a fresh database with the two sinks of
// --with-sinks attached, and paced product.updated deliveries of new products; per delivery, the
// time from its 202 until it is seen on the SSE change feed (projection-freshness.js), until the
// http sink's receiver has it, and until its row is in the postgres table sink's target.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { sampleCpu, waitForQuiet } from './cpu.js';
import { createMigratedDatabase, databaseUrl, dropDatabase } from './database.js';
import { attachSinks, SINK_NETWORKS } from './ingress-sinks.js';
import { freePort, startService, stopService, waitReady } from './processes.js';
import { measureFreshness, percentile } from './projection-freshness.js';

const RATE = 200;
const FIRST_PRODUCT = 5_000_000;
/** Targets (issue 32): SSE and http receipt p99 < 100 ms, row in the table sink p99 < 150 ms. */
const TARGET_P99_MS = { sse: 100, http: 100, postgres: 150 };

export async function measureSinkFreshness({ root, duration, warmup, quietWait, logDir }) {
  const webhookKey = `bench_${randomBytes(12).toString('hex')}`;
  const env = {
    ...process.env,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    WEBHOOK_KEYS: webhookKey,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    ...SINK_NETWORKS,
  };
  delete env.API_TOKENS;
  const database = await createMigratedDatabase({ cwd: root, env, suffix: 'freshness' });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const logFile = join(logDir, 'ingress-freshness-daemon.log');
  const daemon = startService('node', ['dist/src/main.js', 'serve'], {
    cwd: root,
    env: { ...env, DATABASE_URL: databaseUrl(database), PORT: String(port) },
    logFile,
  });
  let sinks = null;
  try {
    await waitReady(daemon, `${base}/health/ready`);
    sinks = await attachSinks({ base, logFile: join(logDir, 'ingress-freshness-receiver.log'), trackArrivals: true });
    if (quietWait > 0) await waitForQuiet({ maxWaitMs: quietWait * 1000, thresholdPct: 15 });
    const total = RATE * (warmup + duration);
    const products = Array.from({ length: total }, (_, k) => String(FIRST_PRODUCT + k));
    const rows = watchTarget(sinks);
    const accepted = [];
    const finishCpu = sampleCpu(daemon.pid, null);
    const sse = await measureFreshness({
      base,
      webhookKey,
      products,
      rate: RATE,
      seconds: duration,
      warmupSeconds: warmup,
      firstSeq: 1,
      observe: 'feed',
      onAccepted: (delivery) => {
        rows.await(delivery.id);
        if (!delivery.warmup) accepted.push(delivery);
      },
    });
    const cpu = finishCpu();
    const catchUp = await sinks.catchUp();
    await rows.stop();
    const arrivals = await sinks.arrivals();
    const http = spans(accepted.map((d) => arrivals[d.eventId] - (performance.timeOrigin + d.acceptedAt)));
    const table = spans(accepted.map((d) => rows.seen.get(d.id) - d.acceptedAt));
    const result = { sse, http, postgres: table, catchUp, cpu };
    const exit = await stopService(daemon);
    return report(result, { duration, warmup, exit });
  } finally {
    await stopService(daemon);
    await sinks?.close().catch(() => undefined);
    await dropDatabase(database);
  }
}

/** Polls the table sink's target every 5 ms for the products still awaited; `seen` maps each to when its row was found. */
function watchTarget(sinks) {
  const reader = new pg.Client({ connectionString: sinks.target.adminUrl, application_name: 'menu-sync-bench' });
  const connected = reader.connect();
  const awaited = new Set();
  const seen = new Map();
  let watching = true;
  const done = (async () => {
    await connected;
    while (watching || awaited.size > 0) {
      if (awaited.size > 0) {
        const { rows } = await reader
          .query(`SELECT id FROM ${sinks.schema}.products WHERE id = ANY($1)`, [[...awaited]])
          .catch((error) => (error.code === '42P01' ? { rows: [] } : Promise.reject(error)));
        const now = performance.now();
        for (const { id } of rows) {
          seen.set(id, now);
          awaited.delete(id);
        }
      }
      if (!watching) break;
      await sleep(5);
    }
    await reader.end();
  })();
  return {
    seen,
    await: (id) => awaited.add(id),
    stop: async () => {
      watching = false;
      await done;
    },
  };
}

/** Percentiles of latencies in ms; a delivery that never arrived (NaN) counts as slower than any. */
function spans(values) {
  const missing = values.filter((v) => !Number.isFinite(v)).length;
  const sorted = values.map((v) => (Number.isFinite(v) ? Math.max(0, v) : Infinity)).sort((a, b) => a - b);
  const ms = (value) => (value === null ? null : value === Infinity ? 'never' : Math.round(value * 10) / 10);
  return {
    deliveries: values.length,
    missing,
    p50Ms: ms(percentile(sorted, 50)),
    p90Ms: ms(percentile(sorted, 90)),
    p99Ms: ms(percentile(sorted, 99)),
    maxMs: ms(sorted.at(-1) ?? null),
    p99Value: percentile(sorted, 99),
  };
}

function report({ sse, http, postgres, catchUp, cpu }, { duration, warmup, exit }) {
  const met = {
    sse: sse.p99Value < TARGET_P99_MS.sse,
    http: http.p99Value < TARGET_P99_MS.http,
    postgres: postgres.p99Value < TARGET_P99_MS.postgres,
  };
  const row = (span, s, target, ok) => [span, s.deliveries, s.missing, s.p50Ms, s.p90Ms, s.p99Ms, s.maxMs, target, ok];
  return {
    settings: {
      rate: RATE,
      warmupSeconds: warmup,
      seconds: duration,
      daemon: 'node dist/src/main.js serve (LOG_LEVEL=info, defaults otherwise) on a fresh database',
      sinks: 'an http sink to bench/lib/http-receiver.js and a postgres sink into a database of the local PostgreSQL',
      deliveries: 'product.updated of a new product each, one every 5 ms; the warm-up not counted',
    },
    freshness: { sse, http, postgres },
    catchUp,
    cpu,
    exit,
    targetMet: met,
    tables: [
      {
        title: `Freshness at ${RATE} deliveries/s for ${duration} s with an http and a postgres table sink attached (CPU % of a core: daemon ${cpu.serverPct}, postgres ${cpu.postgresPct}, other ${cpu.otherPct})`,
        columns: ['span', 'deliveries', 'missing', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'target p99', 'met'],
        rows: [
          row('202 -> seen on SSE', { ...sse, deliveries: sse.accepted, missing: sse.notVisible }, '< 100', met.sse),
          row('202 -> http sink receipt', http, '< 100', met.http),
          row('202 -> row in the postgres sink', postgres, '< 150', met.postgres),
        ],
      },
    ],
  };
}

// Ingress benchmark: POST /webhooks/{key} throughput and latency of the daemon, against a bare
// Node http + one-INSERT-per-request baseline measured in the same run on the same machine.
//
// For each connection count, and for each target (daemon, then baseline):
//   fresh database (clone of a template migrated by `node dist/src/main.js migrate`)
//   -> start the server -> wait for GET /health/ready -> CHECKPOINT -> warm-up -> measured run
//   -> /metrics (daemon), peak RSS, row count check -> stop (SIGTERM, then SIGKILL) -> drop database.
// --with-sinks: the daemon has an http sink and a postgres table sink attached, delivering during
// the load (bench/lib/ingress-sinks.js); their catch-up after the load is reported. --freshness
// (with --with-sinks): 202 -> SSE, -> http sink receipt, -> row in the table sink at 200/s instead.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import {
  admin,
  cloneDatabase,
  createMigratedDatabase,
  databaseUrl,
  dropDatabase,
  POOLER_URL,
  query,
} from './lib/database.js';
import { eventBodies } from './lib/events.js';
import { sampleCpu, waitForQuiet } from './lib/cpu.js';
import { scanLog } from './lib/logs.js';
import { freePort, memoryOf, startService, stopService, waitReady } from './lib/processes.js';
import { attachSinks, SINK_NETWORKS } from './lib/ingress-sinks.js';
import { measureSinkFreshness } from './lib/ingress-freshness.js';
import { compare, problems, tables } from './lib/ingress-report.js';
import { gauges, histogramDelta, round, scrape } from './lib/metrics-text.js';
import { LOCK_SPACES, SINGLE_LOCKS } from '../dist/src/database/advisory-locks.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');

export const description = 'POST /webhooks/{key}: daemon vs bare http + one INSERT per request';

/**
 * What is measured: the whole daemon (its projector applying the appended events in the same
 * process and database), the daemon with PROJECTOR_ENABLED=false (projection run by another
 * daemon: the ingress-only deployment), and the bare baseline; with --with-sinks, the whole daemon
 * with an http and a postgres table sink attached (`daemon+sinks`) and the baseline.
 */
const TARGETS = ['daemon', 'ingest-only', 'baseline'];
const SINK_TARGETS = ['daemon+sinks', 'baseline'];
/** --pooler: the daemon with DATABASE_URL on PgBouncer in transaction mode (test/services.sh) beside it direct. */
const POOLER_TARGETS = ['daemon', 'daemon+pooler', 'baseline'];
const DAEMON_ENV = {
  daemon: {},
  'ingest-only': { PROJECTOR_ENABLED: 'false' },
  'daemon+sinks': SINK_NETWORKS,
  'daemon+pooler': {},
};
/** PgBouncer (pool_mode = transaction) in front of the bench's server: test/services.sh starts it. */

/**
 * The product target: at these connection counts, >= 1.5x the baseline's req/s with a p99 no
 * worse; with the sinks attached, 2x (issue 32).
 */

/** The advisory lock the active projector holds (src/database/advisory-locks.ts). */
const PROJECTOR_LOCK = SINGLE_LOCKS.projector;

export const defaults = { connections: [10, 50, 200], duration: 10, warmup: 3, quietWait: 10 };

export async function run({
  connections,
  duration = defaults.duration,
  warmup = defaults.warmup,
  quietWait = defaults.quietWait,
  withSinks = false,
  freshness = false,
  pooler = false,
  targets,
  logDir,
}) {
  mkdirSync(logDir, { recursive: true });
  if (freshness) {
    if (!withSinks) throw new Error('--freshness goes with --with-sinks');
    return measureSinkFreshness({ root: ROOT, duration, warmup, quietWait, logDir });
  }
  connections ??= withSinks ? [50, 200] : defaults.connections;
  const measured = targets ?? (withSinks ? SINK_TARGETS : pooler ? POOLER_TARGETS : TARGETS);
  const unknown = measured.filter((t) => !(t in DAEMON_ENV) && t !== 'baseline');
  if (unknown.length > 0) throw new Error(`unknown target ${unknown.join(', ')}`);
  const webhookKey = `bench_${randomBytes(12).toString('hex')}`;
  const baseEnv = {
    ...process.env,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    WEBHOOK_KEYS: webhookKey,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
  };
  const template = await createMigratedDatabase({ cwd: ROOT, env: baseEnv });
  const nextBody = eventBodies();
  const sampleSize = Buffer.byteLength(nextBody());
  const runs = [];
  try {
    for (const c of connections) {
      for (const target of measured) {
        const result = await measure({
          target,
          connections: c,
          duration,
          warmup,
          quietWait,
          template,
          baseEnv,
          webhookKey,
          nextBody,
          logDir,
        });
        runs.push(result);
        for (const problem of problems(result)) log(`  WARNING ${target} c=${c}: ${problem}`);
        log(
          `  ${target.padEnd(8)} c=${String(c).padEnd(3)} ${Math.round(result.reqPerSec)} req/s, p50 ${result.p50Ms} ms, ` +
            `p99 ${result.p99Ms} ms, status ${JSON.stringify(result.statusCodes)}, non-2xx ${result.non2xx}, errors ${result.errors}, ` +
            `CPU % of a core: server ${result.cpu.serverPct}, postgres ${result.cpu.postgresPct} (projector ${result.cpu.postgresSubsetPct}, append ${result.cpu.appendPct}), autocannon ${result.cpu.loadGeneratorPct}, ` +
            `other ${result.cpu.otherPct} (machine busy before: ${result.machineBusyBeforePct}%); ` +
            `CPU µs per request: server ${result.cpuPerRequestUs.server}, postgres ${result.cpuPerRequestUs.postgres}`,
        );
        if (result.sinks) log(`  ${target} c=${c} sinks after the load: ${JSON.stringify(result.sinks.catchUp)}`);
      }
    }
  } finally {
    await dropDatabase(template);
  }
  const comparisons = measured.includes('baseline')
    ? measured.filter((t) => t !== 'baseline').flatMap((t) => connections.map((c) => compare(c, runs, t)))
    : [];
  return {
    settings: {
      connections,
      durationSeconds: duration,
      warmupSeconds: warmup,
      bodyBytes: sampleSize,
      pipelining: 1,
      daemon: 'node dist/src/main.js serve (LOG_LEVEL=info, defaults otherwise: DATABASE_POOL_SIZE=10)',
      ...(measured.includes('daemon+pooler')
        ? {
            pooler:
              'daemon+pooler: DATABASE_URL on PgBouncer (pool_mode = transaction, default_pool_size 20, test/services.sh), DATABASE_DIRECT_URL on PostgreSQL; DATABASE_PREPARED_STATEMENTS off (its default then)',
          }
        : {}),
      baseline: 'bench/baseline-server.js (node:http, pg.Pool max 10, one INSERT per request)',
      ...(measured.includes('daemon+sinks')
        ? {
            sinks:
              'daemon+sinks: SINK_ALLOWED_NETWORKS=127.0.0.0/8,::1/128; an http sink to bench/lib/http-receiver.js (node:http, 204) and a postgres sink (schema menu_sync) into a database of the local PostgreSQL with a role of its own, both created (from "start", defaults otherwise) before the warm-up',
          }
        : {}),
    },
    runs,
    comparisons,
    targetMet: comparisons
      .filter((row) => row.targeted && (row.target === 'daemon' || row.target === 'daemon+sinks'))
      .every((row) => row.met),
    tables: tables(runs, comparisons),
  };
}

async function measure({
  target,
  connections,
  duration,
  warmup,
  quietWait,
  template,
  baseEnv,
  webhookKey,
  nextBody,
  logDir,
}) {
  const database = await cloneDatabase(template, `${target}_c${connections}`);
  const port = await freePort();
  const logFile = join(logDir, `ingress-${target}-c${connections}.log`);
  const env = { ...baseEnv, DATABASE_URL: databaseUrl(database), PORT: String(port) };
  if (target === 'daemon+pooler') {
    const pooled = new URL(POOLER_URL);
    pooled.pathname = `/${database}`;
    Object.assign(env, { DATABASE_URL: pooled.toString(), DATABASE_DIRECT_URL: databaseUrl(database) });
  }
  const child =
    target !== 'baseline'
      ? startService('node', ['dist/src/main.js', 'serve'], {
          cwd: ROOT,
          env: { ...env, ...DAEMON_ENV[target] },
          logFile,
        })
      : startService('node', [join(HERE, 'baseline-server.js')], {
          cwd: ROOT,
          env: { ...env, WEBHOOK_KEY: webhookKey, POOL_SIZE: '10' },
          logFile,
        });
  const base = `http://127.0.0.1:${port}`;
  let sinks = null;
  try {
    await waitReady(child, `${base}/health/ready`);
    if (target === 'daemon+sinks')
      sinks = await attachSinks({ base, logFile: join(logDir, `ingress-receiver-c${connections}.log`) });
    await admin('CHECKPOINT');
    // Others may share the machine (a test run...): give their burst a few seconds to end.
    const busyBeforePct = quietWait > 0 ? await waitForQuiet({ maxWaitMs: quietWait * 1000, thresholdPct: 15 }) : null;
    const load = { url: `${base}/webhooks/${webhookKey}`, connections, nextBody };
    const warm = warmup > 0 ? await cannon({ ...load, duration: warmup }) : null;
    const metricsBefore = target !== 'baseline' ? await scrape(base) : null;
    const pgPids = (
      await admin(
        `SELECT pid FROM pg_stat_activity
      WHERE (datname = $1 AND pid <> pg_backend_pid()) OR backend_type NOT IN ('client backend', 'autovacuum worker')`,
        [database],
      )
    ).rows.map((row) => row.pid);
    // The daemon's projector holds advisory locks on its own connections (its lease, a lane per
    // projection): their backends' CPU is reported apart (the baseline has no projector).
    const projectorPids = (
      await admin(
        `SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
      WHERE l.locktype = 'advisory' AND l.granted AND d.datname = $1
        AND ((l.classid = 0 AND l.objid = $2 AND l.objsubid = 1) OR (l.classid = $3 AND l.objsubid = 2))`,
        [database, PROJECTOR_LOCK, LOCK_SPACES.projectorLane],
      )
    ).rows.map((row) => row.pid);
    const finishCpu = sampleCpu(child.pid, pgPids, projectorPids);
    // The daemon's append pool (its backends last ran the append): the rest of `pg` besides the
    // projector is the sinks' reads and cursor moves, the API's and PostgreSQL's background work.
    const appendPids =
      target === 'baseline'
        ? []
        : (
            await admin(
              `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND (query LIKE 'INSERT INTO event_log%' OR query LIKE 'WITH batch AS%')`,
              [database],
            )
          ).rows.map((row) => row.pid);
    const finishAppendCpu = sampleCpu(child.pid, pgPids, appendPids);
    // The sinks' targets (the receiver, the target database's backends) are counted apart from "other".
    const finishTargetsCpu = sinks ? sampleCpu(sinks.receiverPid, (await sinks.targetPids()).map(String)) : null;
    const measuredFromUs = Number(process.hrtime.bigint() / 1000n);
    const result = await cannon({ ...load, duration });
    // On the monotonic clock of the servers' CPU profiles (bench/cpu-profile.js --from --to).
    const measuredUs = [measuredFromUs, Number(process.hrtime.bigint() / 1000n)];
    const cpu = finishCpu();
    cpu.appendPct = finishAppendCpu().postgresSubsetPct;
    if (finishTargetsCpu) {
      const targets = finishTargetsCpu();
      cpu.sinkTargetsPct = Math.round((targets.serverPct + targets.postgresPct) * 10) / 10;
      cpu.otherPct = Math.max(0, Math.round(cpu.otherPct - cpu.sinkTargetsPct));
    }
    const sinksAfter = sinks ? await sinksCaughtUp(sinks, database) : null;
    const metricsAfter = target !== 'baseline' ? await scrape(base) : null;
    const memory = memoryOf(child.pid);
    const rows = Number((await query(database, 'SELECT count(*) AS n FROM event_log')).rows[0].n);
    const accepted = (result.statusCodeStats['202']?.count ?? 0) + (warm?.statusCodeStats['202']?.count ?? 0);
    const stopped = await stopService(child);
    await sinks?.close();
    sinks = null;
    const logs = scanLog(logFile, { json: target !== 'baseline' });
    return {
      target,
      connections,
      reqPerSec: result.requests.mean,
      reqPerSecStddev: result.requests.stddev,
      p50Ms: result.latency.p50,
      // CPU time per answered request (µs): what a change costs, less sensitive to the machine's other load than req/s.
      cpuPerRequestUs: {
        server: Math.round((cpu.serverPct * 1e4) / result.requests.mean),
        postgres: Math.round((cpu.postgresPct * 1e4) / result.requests.mean),
      },
      p90Ms: result.latency.p90,
      p99Ms: result.latency.p99,
      maxMs: result.latency.max,
      requests: result.requests.total,
      statusCodes: Object.fromEntries(
        Object.entries(result.statusCodeStats).map(([code, stats]) => [code, stats.count]),
      ),
      non2xx: result.non2xx,
      errors: result.errors,
      timeouts: result.timeouts,
      warmupRequests: warm?.requests.total ?? 0,
      machineBusyBeforePct: busyBeforePct,
      rowsInLog: rows,
      accepted202IncludingWarmup: accepted,
      // Requests still in flight when autocannon stops (up to `connections` per run) may be committed
      // without their 202 being counted: rows may exceed the 202s by that much, never fall short.
      rowsMatch: rows >= accepted && rows - accepted <= 2 * connections,
      peakRssMiB: round(memory.peakRssMiB, 1),
      cpu,
      appendBatchSize: metricsAfter
        ? histogramDelta(metricsBefore, metricsAfter, 'menu_sync_event_append_batch_size')
        : null,
      appendSeconds: metricsAfter
        ? histogramDelta(metricsBefore, metricsAfter, 'menu_sync_event_append_seconds')
        : null,
      // The daemon also runs the projector (it reads the log back while ingress appends): where it stood.
      gaugesAtEnd: metricsAfter
        ? gauges(metricsAfter, [
            'menu_sync_log_head_position',
            'menu_sync_projection_position',
            'menu_sync_projection_lag_events',
            'menu_sync_parked_events',
          ])
        : null,
      sinks: sinksAfter,
      serverPid: child.pid,
      measuredUs,
      exit: stopped,
      logFile,
      logWarnings: logs.warnings,
      logErrors: logs.errors,
      firstLogProblem: logs.first,
    };
  } catch (error) {
    await stopService(child);
    await sinks?.close().catch(() => undefined);
    error.message += ` (${target}, ${connections} connections; log: ${logFile})`;
    throw error;
  } finally {
    await dropDatabase(database);
  }
}

/**
 * The sinks after the load: their catch-up (lag at the stop, seconds until caught up), then what
 * their targets hold: the receiver's count of changes, and the table sink's rows, which must be the
 * daemon's products (the same ids and versions).
 */
async function sinksCaughtUp(sinks, database) {
  const catchUp = await sinks.catchUp();
  const received = await sinks.receiverStats();
  const own = (await query(database, `SELECT id, event_id FROM proj_menu.products ORDER BY id`)).rows;
  const inTarget = await sinks.target.rows(
    `SELECT id, resource->'version'->>'event_id' AS event_id FROM ${sinks.schema}.products ORDER BY id`,
  );
  const tableMatches = JSON.stringify(own) === JSON.stringify(inTarget);
  return { catchUp, received, products: own.length, targetRows: inTarget.length, tableMatches };
}

/** One bounded autocannon run; every request carries a new event (a distinct data.id). */
function cannon({ url, connections, duration, nextBody }) {
  return autocannon({
    url,
    connections,
    duration,
    pipelining: 1,
    timeout: 10,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    requests: [{ setupRequest: (request) => ({ ...request, body: nextBody() }) }],
  });
}

function log(line) {
  process.stderr.write(`${line}\n`);
}

// Projection benchmark: how fast the daemon's projector catches up on a large log, against a
// set-based SQL rebuild of the same read model measured in the same run, and how fresh the read
// model stays under a steady delivery rate.
//
//   fresh database migrated by `node dist/src/main.js migrate`
//   -> fill event_log with 1M events by SQL (timed apart, not part of the result), VACUUM ANALYZE, CHECKPOINT
//   -> baseline: one INSERT … SELECT DISTINCT ON … per read-model table, into a scratch schema
//   -> daemon: `serve` on the same database (read model empty), time until both projections are at
//      the head; RSS, CPU split, what the projector's backend is doing; compare with the baseline
//   -> freshness: 200 deliveries/s, each followed until GET /api/v1/products/{id} shows it
//   -> stop the daemon, drop the database (also on error).
import { randomBytes } from 'node:crypto';
import { mkdirSync, statfsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { admin, createMigratedDatabase, databaseUrl, dropDatabase, POOLER_URL } from './lib/database.js';
import { sampleCpu, waitForQuiet } from './lib/cpu.js';
import { scanLog } from './lib/logs.js';
import { freePort, memoryOf, startService, stopService, waitReady } from './lib/processes.js';
import { FOREIGN_XACT_SQL, sampleActivity, summarize } from './lib/projection-activity.js';
import {
  BASELINE_SCHEMA,
  baselineSetupSql,
  compareSql,
  MENU_TABLES,
  menuBaselineSql,
  ordersBaselineSql,
  TABLES,
} from './lib/projection-baseline.js';
import { fillSql, firstCreatedAt, MENU } from './lib/projection-events.js';
import { measureFreshness } from './lib/projection-freshness.js';
import { sampleAppendWaits } from './lib/append-waits.js';
import { LOCK_SPACES, SINGLE_LOCKS } from '../dist/src/database/advisory-locks.js';
import { PROJECTIONS } from '../dist/src/projection/projection-definitions.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');

export const description =
  'projector catch-up over 1M logged events vs set-based SQL, RSS, and freshness (202 -> visible) at 200 deliveries/s';

/** The issue's targets. */
const TARGET = { minRatio: 0.5, maxRssMiB: 300, freshnessP99Ms: 250 };
/** The advisory locks the active projector holds (src/database/advisory-locks.ts): its lease, and one per projection's lane. */
const PROJECTOR_LOCK = SINGLE_LOCKS.projector;
const PROJECTOR_LANE_SPACE = LOCK_SPACES.projectorLane;
const FILL_CHUNK = 100_000;
const CATCH_UP_TIMEOUT_MS = 300_000;
const SAMPLE_MS = 100;
const RSS_EVERY = 5; // samples: RSS every 0.5 s
const FRESHNESS_RATE = 200;

/** `--duration` is the freshness measurement's length (s); BENCH_PROJECTION_EVENTS shrinks the log for a quick look. */
/**
 * `--observe`: how a delivery is seen to be visible. `feed` (default): one SSE connection to
 * /api/v1/changes, plus a read-back through GET /api/v1/products/{id} of every 20th; `poll`: GET
 * /api/v1/products/{id} every 10 ms per delivery until it shows (the measuring load grows with the lateness).
 */
export const defaults = { duration: 20, warmup: 3, quietWait: 10, observe: 'feed' };

export async function run({
  duration = defaults.duration,
  warmup = defaults.warmup,
  quietWait = defaults.quietWait,
  observe = defaults.observe,
  pooler = false,
  logDir,
}) {
  if (observe !== 'feed' && observe !== 'poll') throw new Error(`--observe must be feed or poll, not ${observe}`);
  mkdirSync(logDir, { recursive: true });
  const events = Number(process.env.BENCH_PROJECTION_EVENTS ?? 1_000_000);
  checkDisk(events);
  const webhookKey = randomBytes(16).toString('hex');
  const baseEnv = {
    ...process.env,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    HOST: '127.0.0.1',
    SANDBOX: 'false',
  };
  delete baseEnv.API_TOKENS;
  delete baseEnv.PROJECTOR_ENABLED;
  const database = await createMigratedDatabase({ cwd: ROOT, env: baseEnv, suffix: 'projection' });
  const client = new pg.Client({ connectionString: databaseUrl(database), application_name: 'menu-sync-bench' });
  await client.connect();
  let daemon;
  try {
    const filled = await fill(client, events);
    const baseline = await runBaseline(client, database, events, quietWait);
    const port = await freePort();
    const logFile = join(logDir, 'projection-daemon.log');
    const env = {
      ...baseEnv,
      DATABASE_URL: databaseUrl(database),
      PORT: String(port),
      LOG_LEVEL: 'warn',
      RECONCILE_CRON: 'off',
      WEBHOOK_KEYS: webhookKey,
    };
    if (quietWait > 0) await waitForQuiet({ maxWaitMs: quietWait * 1000, thresholdPct: 15 });
    // Before the daemon read below a server-wide horizon, a long transaction in another database stalled it.
    const serverWideHorizon = (await client.query(`SELECT to_regprocedure('event_log_horizon()') IS NULL AS old`))
      .rows[0].old;
    const heldBeforeCatchUp = serverWideHorizon ? await waitForHorizon(client) : null;
    // The work tree may be shared: what was measured is the dist/ built at this time, not necessarily HEAD.
    const distBuiltAt = statSync(join(ROOT, 'dist/src/projection/projection.repository.js')).mtime.toISOString();
    const spawnedAt = performance.now();
    daemon = startService('node', ['dist/src/main.js', 'serve'], { cwd: ROOT, env, logFile });
    const base = `http://127.0.0.1:${port}`;
    const catchUp = await measureCatchUp({ client, database, daemon, events, spawnedAt });
    catchUp.foreignXactBeforeSeconds = heldBeforeCatchUp;
    await waitReady(daemon, `${base}/health/ready`);
    const status = await getJson(`${base}/api/v1/projections`);
    catchUp.projections = status.data;
    catchUp.atHead = catchUp.caughtUp && status.data.every((p) => p.lag === 0 && p.position === p.head);
    const correctness = await checkCorrectness(client, base);
    let freshness = null;
    let products = [];
    if (catchUp.atHead) {
      products = (
        await client.query(`SELECT id FROM ${BASELINE_SCHEMA}.products WHERE NOT deleted ORDER BY md5(id) LIMIT $1`, [
          FRESHNESS_RATE * (warmup + duration),
        ])
      ).rows.map((row) => row.id);
      const heldBeforeFreshness = serverWideHorizon ? await waitForHorizon(client) : null;
      log(`freshness: ${FRESHNESS_RATE} deliveries/s for ${warmup} s (warm-up, reported apart) + ${duration} s`);
      // Open the daemon's pool connections first, so that their backends count as PostgreSQL's CPU, not "other".
      await Promise.all(products.slice(0, 40).map((id) => getJson(`${base}/api/v1/products/${id}`)));
      const pgPids = await postgresPids(database, client);
      const projectorPids = await projectorSessions(database);
      const finishCpu = sampleCpu(daemon.pid, pgPids, projectorPids);
      // The menu's lane, on the lease's session: where the freshness of product deliveries is decided.
      const finishActivity = sampleActivity(client, (await lockHolders(database))[0], SAMPLE_MS);
      const waitClient = new pg.Client({
        connectionString: databaseUrl(database),
        application_name: 'menu-sync-bench-waits',
      });
      await waitClient.connect();
      const finishWaits = sampleAppendWaits(waitClient, database);
      const appendBefore = await appendHistogram(base);
      freshness = await measureFreshness({
        base,
        webhookKey,
        products,
        rate: FRESHNESS_RATE,
        seconds: duration,
        warmupSeconds: warmup,
        firstSeq: events + 1,
        observe,
      });
      freshness.cpu = finishCpu();
      freshness.activity = await finishActivity();
      freshness.waits = await finishWaits();
      await waitClient.end();
      freshness.appendInDaemon = histogramDelta(appendBefore, await appendHistogram(base));
      freshness.foreignXactBeforeSeconds = heldBeforeFreshness;
      if (observe === 'feed')
        log(
          `  seen on the change feed (SSE); ${freshness.readBacks} read back through GET /api/v1/products/{id}, ${freshness.readBacksStale} not yet visible there`,
        );
      log(
        `  p50 ${freshness.p50Ms} ms, p90 ${freshness.p90Ms} ms, p99 ${freshness.p99Ms} ms, max ${freshness.maxMs} ms over ${freshness.accepted} ` +
          `deliveries answered 202 (${freshness.notVisible} not visible within ${freshness.giveUpMs} ms), achieved ${freshness.achievedRate}/s`,
      );
      if (freshness.warmup)
        log(
          `  warm-up (first ${warmup} s, not in the above): p50 ${freshness.warmup.p50Ms} ms, p99 ${freshness.warmup.p99Ms} ms, ` +
            `max ${freshness.warmup.maxMs} ms, POST p99 ${freshness.warmup.postP99Ms} ms`,
        );
    } else {
      log('freshness skipped: the daemon did not catch up');
    }
    const memoryAtEnd = memoryOf(daemon.pid);
    const exit = await stopService(daemon);
    // The ingress baseline of this run: bench/baseline-server.js (node:http + pg, one INSERT per
    // request) on the same database, at the same paced rate, right after the daemon stopped.
    let ingressBaseline = null;
    if (freshness)
      ingressBaseline = await measureIngressBaseline({
        database,
        webhookKey,
        products,
        duration,
        warmup,
        firstSeq: events + 1 + FRESHNESS_RATE * (warmup + duration),
        logDir,
      });
    // --pooler: the freshness again, the daemon's DATABASE_URL on PgBouncer (transaction mode).
    const poolerFreshness =
      pooler && freshness
        ? await measurePoolerFreshness({
            env,
            database,
            webhookKey,
            products,
            duration,
            warmup,
            observe,
            firstSeq: events + 1 + 2 * FRESHNESS_RATE * (warmup + duration),
            logDir,
          })
        : null;
    const logs = scanLog(logFile);
    const result = {
      events,
      serverWideHorizon,
      filled,
      baseline,
      catchUp,
      correctness,
      freshness,
      ingressBaseline,
      poolerFreshness,
      daemonPeakRssAtEndMiB: round(memoryAtEnd.peakRssMiB, 1),
      exit,
      logFile,
      logWarnings: logs.warnings,
      logErrors: logs.errors,
      firstLogProblem: logs.first,
    };
    const verdict = judge(result);
    for (const problem of verdict.problems) log(`  WARNING: ${problem}`);
    return {
      settings: {
        events,
        menu: MENU,
        fillChunk: FILL_CHUNK,
        freshnessRate: FRESHNESS_RATE,
        freshnessSeconds: duration,
        observe,
        daemon: 'node dist/src/main.js serve (LOG_LEVEL=warn, RECONCILE_CRON=off, defaults otherwise)',
        distBuiltAt,
        baseline: `one INSERT … SELECT DISTINCT ON (id) … ORDER BY id, version DESC per read-model table into ${BASELINE_SCHEMA}`,
      },
      ...result,
      verdict,
      targetMet: verdict.met,
      tables: tables(result, verdict),
    };
  } finally {
    if (daemon) await stopService(daemon);
    await client.end().catch(() => undefined);
    await dropDatabase(database);
  }
}

function checkDisk(events) {
  const stats = statfsSync('/');
  const freeGiB = (stats.bavail * stats.bsize) / 2 ** 30;
  const needGiB = (events * 3500) / 2 ** 30; // ~1.5 KB of table and indexes per event, WAL, sort spills
  if (freeGiB < needGiB + 2)
    throw new Error(`${freeGiB.toFixed(1)} GiB free on /, the projection bench needs ~${needGiB.toFixed(1)} GiB`);
}

/** 1M events in chunks of 100k, one transaction each (transaction_id default), then VACUUM ANALYZE. */
export async function fill(client, events) {
  await client.query('SET jit = off');
  await client.query('SET synchronous_commit = off');
  const sql = fillSql();
  const first = firstCreatedAt(events);
  // Partitions for every position the fill takes (the daemon makes them ahead of its own appends).
  await client.query('SELECT event_log_extend($1)', [events]);
  const started = performance.now();
  for (let lo = 1; lo <= events; lo += FILL_CHUNK) {
    const hi = Math.min(events, lo + FILL_CHUNK - 1);
    await client.query(sql, [lo, hi, first]);
    process.stderr.write(`\r  fill: ${hi} / ${events} events, ${Math.round((performance.now() - started) / 1000)} s`);
  }
  process.stderr.write('\n');
  const fillSeconds = (performance.now() - started) / 1000;
  const vacuumStarted = performance.now();
  await client.query('VACUUM (ANALYZE) event_log');
  const vacuumSeconds = (performance.now() - vacuumStarted) / 1000;
  await client.query('RESET jit');
  await client.query('RESET synchronous_commit');
  await admin('CHECKPOINT');
  const [size] = (
    await client.query(`SELECT sum(pg_total_relation_size(relid)) AS total, sum(pg_relation_size(relid)) AS heap,
    (SELECT avg(octet_length(payload::text)) FROM (SELECT payload FROM event_log TABLESAMPLE SYSTEM (1)) s) AS payload_bytes
      FROM pg_partition_tree('event_log')`)
  ).rows;
  const byType = Object.fromEntries(
    (await client.query(`SELECT event_type, count(*)::int AS n FROM event_log GROUP BY 1 ORDER BY 2 DESC`)).rows.map(
      (row) => [row.event_type, row.n],
    ),
  );
  const result = {
    events,
    fillSeconds: round(fillSeconds, 1),
    eventsPerSec: Math.round(events / fillSeconds),
    vacuumSeconds: round(vacuumSeconds, 1),
    logTotalMiB: Math.round(Number(size.total) / 2 ** 20),
    logHeapMiB: Math.round(Number(size.heap) / 2 ** 20),
    meanPayloadBytes: Math.round(Number(size.payload_bytes)),
    byType,
  };
  log(
    `  filled ${events} events in ${result.fillSeconds} s (${result.eventsPerSec}/s), VACUUM ANALYZE ${result.vacuumSeconds} s, ` +
      `event_log ${result.logTotalMiB} MiB with indexes, mean payload ${result.meanPayloadBytes} B`,
  );
  return result;
}

/** The set-based rebuild of the eight tables from the whole log, timed per table. */
export async function runBaseline(client, database, events, quietWait) {
  for (const statement of baselineSetupSql()) await client.query(statement);
  await admin('CHECKPOINT');
  if (quietWait > 0) await waitForQuiet({ maxWaitMs: quietWait * 1000, thresholdPct: 15 });
  const finishCpu = sampleCpu(null, await postgresPids(database));
  const perTable = [];
  const started = performance.now();
  for (const table of MENU_TABLES) {
    const t = performance.now();
    const inserted = await client.query(menuBaselineSql(table));
    perTable.push({ table: table.table, rows: inserted.rowCount, seconds: round((performance.now() - t) / 1000, 2) });
  }
  const t = performance.now();
  const orders = await client.query(ordersBaselineSql());
  perTable.push({
    table: 'orders (4 tables, one statement)',
    rows: Number(orders.rows[0].rows),
    seconds: round((performance.now() - t) / 1000, 2),
  });
  const seconds = (performance.now() - started) / 1000;
  const cpu = finishCpu();
  const productEvents = (await client.query(`SELECT count(*)::int AS n FROM event_log WHERE subject_type = 'product'`))
    .rows[0].n;
  const products = perTable.find((row) => row.table === 'products');
  const result = {
    seconds: round(seconds, 1),
    eventsPerSec: Math.round(events / seconds),
    perTable,
    cpu,
    productEvents,
    productEventsPerSec: Math.round(productEvents / products.seconds),
  };
  log(
    `  baseline: ${result.seconds} s for the 8 tables = ${result.eventsPerSec} events/s (products alone: ${productEvents} events in ` +
      `${products.seconds} s = ${result.productEventsPerSec}/s); postgres CPU ${cpu.postgresPct} %`,
  );
  return result;
}

/** From the projector taking its lock until both checkpoints have applied every logged event. */
async function measureCatchUp({ client, database, daemon, events, spawnedAt }) {
  let exited = null;
  daemon.exited.then((status) => (exited = status));
  let projectorPid = null;
  const lockDeadline = performance.now() + 180_000; // a daemon starts in ~5 s, but in ~60 s on this machine at load average 40
  while (projectorPid === null) {
    if (exited) throw new Error(`the daemon exited before projecting (${exited.signal ?? `exit ${exited.code}`})`);
    if (performance.now() > lockDeadline) throw new Error('the daemon did not take the projector lock within 180 s');
    projectorPid = (await lockHolders(database))[0] ?? null;
    if (projectorPid === null) await sleep(20);
  }
  const startedAt = performance.now();
  log(`  projector started ${round((startedAt - spawnedAt) / 1000, 1)} s after spawn (backend ${projectorPid})`);
  // The lanes' sessions (one per projection) open right after the lease is taken: their backends are the projector's too.
  let projectorPids = [projectorPid];
  for (const deadline = performance.now() + 5000; performance.now() < deadline; await sleep(10)) {
    projectorPids = await projectorSessions(database);
    if (projectorPids.length > PROJECTIONS.length - 1) break;
  }
  const finishCpu = sampleCpu(daemon.pid, await postgresPids(database, client), projectorPids);
  const samples = [];
  const progress = [];
  let peakRss = 0;
  let caughtUp = false;
  let last;
  for (let n = 0; ; n++) {
    if (exited) throw new Error(`the daemon exited during catch-up (${exited.signal ?? `exit ${exited.code}`})`);
    const [row] = (
      await client.query(
        `
      SELECT (SELECT applied FROM proj_menu.checkpoint)::bigint AS menu, (SELECT applied FROM proj_orders.checkpoint)::bigint AS orders,
             a.state, a.wait_event_type, a.wait_event, left(a.query, 600) AS query, ${FOREIGN_XACT_SQL} AS foreign_xact_s
        FROM (SELECT 1) AS one LEFT JOIN pg_stat_activity a ON a.pid = $1`,
        [projectorPid],
      )
    ).rows;
    const at = performance.now() - startedAt;
    last = { menu: Number(row.menu), orders: Number(row.orders) };
    progress.push({ ms: Math.round(at), ...last });
    samples.push({
      state: row.state,
      wait_event_type: row.wait_event_type,
      wait_event: row.wait_event,
      query: row.query,
      foreign_xact_s: row.foreign_xact_s,
    });
    if (n % RSS_EVERY === 0) peakRss = Math.max(peakRss, memoryOf(daemon.pid).rssMiB || 0);
    if (last.menu >= events && last.orders >= events) {
      caughtUp = true;
      break;
    }
    if (at > CATCH_UP_TIMEOUT_MS) break;
    if (n % 50 === 0)
      process.stderr.write(
        `\r  catch-up: menu ${last.menu}, orders ${last.orders} / ${events}, ${Math.round(at / 1000)} s`,
      );
    await sleep(SAMPLE_MS);
  }
  process.stderr.write('\n');
  const seconds = (performance.now() - startedAt) / 1000;
  const cpu = finishCpu();
  const memory = memoryOf(daemon.pid);
  const applied = Math.min(last.menu, last.orders);
  const result = {
    caughtUp,
    seconds: round(seconds, 1),
    secondsFromSpawn: round((performance.now() - spawnedAt) / 1000, 1),
    applied,
    eventsPerSec: Math.round(applied / seconds),
    peakRssSampledMiB: round(Math.max(peakRss, memory.rssMiB || 0), 1),
    peakRssMiB: round(memory.peakRssMiB, 1),
    cpu,
    activity: summarize(samples),
    byDecile: deciles(progress, events),
    progress: progress.filter((_, i) => i % 10 === 0),
  };
  log(
    `  daemon: ${caughtUp ? 'caught up' : `NOT caught up (${applied} applied)`} in ${result.seconds} s = ${result.eventsPerSec} events/s, ` +
      `VmHWM ${result.peakRssMiB} MiB, CPU % of a core: daemon ${cpu.serverPct}, postgres ${cpu.postgresPct} (projector ${cpu.postgresSubsetPct}), other ${cpu.otherPct}`,
  );
  return result;
}

/** Catch-up rate (menu projection's applied count) over each tenth of the log. */
function deciles(progress, events) {
  const out = [];
  let previous = { ms: 0, menu: 0 };
  for (let d = 1; d <= 10; d++) {
    const reached = progress.find((p) => p.menu >= (events * d) / 10);
    if (!reached) break;
    out.push({
      decile: d,
      eventsPerSec: Math.round(((reached.menu - previous.menu) / Math.max(1, reached.ms - previous.ms)) * 1000),
    });
    previous = reached;
  }
  return out;
}

/** The read model against the baseline, table by table, and a few products through the API. */
async function checkCorrectness(client, base) {
  const perTable = [];
  for (const table of TABLES) {
    const [row] = (await client.query(compareSql(table))).rows;
    perTable.push({ table: `${table.schema}.${table.table}`, ...row });
  }
  const sample = (
    await client.query(
      `SELECT id, attributes FROM ${BASELINE_SCHEMA}.products WHERE NOT deleted ORDER BY md5(id || 'api') LIMIT 5`,
    )
  ).rows;
  const api = [];
  for (const { id, attributes } of sample) {
    const product = await getJson(`${base}/api/v1/products/${id}`);
    api.push({ id, same: JSON.stringify(product.attributes) === JSON.stringify(attributes) });
  }
  const products = perTable.find((row) => row.table === 'proj_menu.products');
  const ok =
    perTable.every((row) => row.missing === 0 && row.extra === 0 && row.differ === 0) && api.every((row) => row.same);
  log(
    `  correctness: live products daemon ${products.daemon_live} / baseline ${products.baseline_live}; ` +
      `${ok ? 'every table matches the baseline' : `MISMATCH ${JSON.stringify(perTable.filter((r) => r.missing || r.extra || r.differ))}`}; ` +
      `API sample ${api.filter((row) => row.same).length}/${api.length} same`,
  );
  return { ok, perTable, api };
}

/**
 * Waits (at most 30 s) until no transaction of another database on the server has held an xid for
 * more than 0.5 s: such a transaction stops the projector from reading anything appended after it
 * began. Returns the age (s) of the oldest one still open when it stopped waiting, or null.
 */
async function waitForHorizon(client) {
  const deadline = performance.now() + 30_000;
  for (;;) {
    const held = (await client.query(`SELECT ${FOREIGN_XACT_SQL} AS s`)).rows[0].s;
    if (held === null || held < 0.5) return held;
    if (performance.now() > deadline) {
      log(`  a transaction of another database has been open for ${Math.round(held)} s: measuring anyway`);
      return held;
    }
    await sleep(500);
  }
}

/** The bench database's backends (less `client`'s own) and PostgreSQL's background processes. */
async function postgresPids(database, client) {
  const own = client ? (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid : -1;
  return (
    await admin(
      `SELECT pid FROM pg_stat_activity
    WHERE (datname = $1 AND pid <> pg_backend_pid() AND pid <> $2) OR backend_type NOT IN ('client backend', 'autovacuum worker')`,
      [database, own],
    )
  ).rows.map((row) => row.pid);
}

/** The backends of the projector's sessions: the lease's and the lanes' (the lease's holds a lane lock too). */
async function projectorSessions(database) {
  return (
    await admin(
      `SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
    WHERE l.locktype = 'advisory' AND l.granted AND d.datname = $1
      AND ((l.classid = 0 AND l.objid = $2 AND l.objsubid = 1) OR (l.classid = $3 AND l.objsubid = 2))`,
      [database, PROJECTOR_LOCK, PROJECTOR_LANE_SPACE],
    )
  ).rows.map((row) => row.pid);
}

async function lockHolders(database) {
  return (
    await admin(
      `SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
    WHERE l.locktype = 'advisory' AND l.granted AND d.datname = $1 AND l.classid = 0 AND l.objid = $2 AND l.objsubid = 1`,
      [database, PROJECTOR_LOCK],
    )
  ).rows.map((row) => row.pid);
}

/** The daemon's menu_sync_event_append_seconds histogram (cumulative bucket counts by upper bound). */
async function appendHistogram(base) {
  const text = await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const buckets = {};
  for (const match of text.matchAll(/^menu_sync_event_append_seconds_bucket\{le="([^"]+)"\} (\d+)/gm))
    buckets[match[1]] = Number(match[2]);
  return buckets;
}

/** Percentiles (as bucket upper bounds, ms) of the appends observed between two scrapes. */
function histogramDelta(before, after) {
  const bounds = Object.keys(after)
    .filter((le) => le !== '+Inf')
    .sort((a, b) => Number(a) - Number(b));
  const total = (after['+Inf'] ?? 0) - (before['+Inf'] ?? 0);
  const at = (p) => {
    const bound = bounds.find((le) => (after[le] ?? 0) - (before[le] ?? 0) >= p * total);
    return bound === undefined ? '> 5000' : `<= ${Number(bound) * 1000}`;
  };
  return {
    appends: total,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    over1sPct: total ? round((100 * (total - ((after['1'] ?? 0) - (before['1'] ?? 0)))) / total, 2) : 0,
  };
}

/**
 * The freshness run of a second daemon on the same database, its DATABASE_URL on PgBouncer in
 * transaction mode (test/services.sh) and DATABASE_DIRECT_URL on PostgreSQL, named statements off
 * (their default then): what a pooler in the path costs a delivery's way to the feed.
 */
async function measurePoolerFreshness({
  env,
  database,
  webhookKey,
  products,
  duration,
  warmup,
  observe,
  firstSeq,
  logDir,
}) {
  const pooled = new URL(POOLER_URL);
  pooled.pathname = `/${database}`;
  return pacedAgainst({
    args: ['dist/src/main.js', 'serve'],
    env: { ...env, DATABASE_URL: pooled.toString(), DATABASE_DIRECT_URL: databaseUrl(database) },
    logFile: join(logDir, 'projection-daemon-pooler.log'),
    announce: `freshness through PgBouncer: ${FRESHNESS_RATE} deliveries/s for ${warmup} s (warm-up) + ${duration} s`,
    measure: { webhookKey, products, seconds: duration, warmupSeconds: warmup, firstSeq, observe },
    report: (measured) =>
      `  p50 ${measured.p50Ms} ms, p90 ${measured.p90Ms} ms, p99 ${measured.p99Ms} ms, max ${measured.maxMs} ms over ${measured.accepted} ` +
      `deliveries answered 202 (${measured.notVisible} not visible), POST p99 ${measured.postP99Ms} ms`,
  });
}

async function measureIngressBaseline({ database, webhookKey, products, duration, warmup, firstSeq, logDir }) {
  return pacedAgainst({
    args: [join(HERE, 'baseline-server.js')],
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl(database),
      HOST: '127.0.0.1',
      POOL_SIZE: '10',
      WEBHOOK_KEY: webhookKey,
    },
    logFile: join(logDir, 'projection-ingress-baseline.log'),
    announce: `ingress baseline: ${FRESHNESS_RATE} deliveries/s for ${duration} s, POST only`,
    measure: { webhookKey, products, seconds: duration, warmupSeconds: warmup, firstSeq, poll: false },
    report: (measured) =>
      `  POST p50 ${measured.postP50Ms} ms, p99 ${measured.postP99Ms} ms, ${measured.accepted} answered 202`,
  });
}

/**
 * Starts a server (`node <args>` with `env` and a free PORT), waits until it is ready, paces
 * FRESHNESS_RATE deliveries/s at it (measureFreshness with `measure`) while sampling its CPU, and
 * stops it: the freshness and CPU of one server.
 */
async function pacedAgainst({ args, env, logFile, announce, measure, report }) {
  const port = await freePort();
  const server = startService('node', args, { cwd: ROOT, env: { ...env, PORT: String(port) }, logFile });
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitReady(server, `${base}/health/ready`);
    const finishCpu = sampleCpu(server.pid, []);
    log(announce);
    const measured = await measureFreshness({ base, rate: FRESHNESS_RATE, ...measure });
    const cpu = finishCpu();
    log(report(measured));
    return { ...measured, cpu };
  } finally {
    await stopService(server);
  }
}

async function getJson(url) {
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  const text = await response.text();
  if (response.status >= 500 || response.status === 404)
    throw new Error(`GET ${url}: ${response.status} ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

function judge({
  serverWideHorizon,
  baseline,
  catchUp,
  correctness,
  freshness,
  logWarnings,
  logErrors,
  logFile,
  firstLogProblem,
}) {
  // Judged unrounded: 0.4988 shows as 0.5x but is not half.
  const exact = catchUp.eventsPerSec / baseline.eventsPerSec;
  const ratio = round(exact, 3);
  const checks = {
    ratio: { value: ratio, met: catchUp.caughtUp && exact >= TARGET.minRatio },
    rss: { value: catchUp.peakRssMiB, met: catchUp.peakRssMiB < TARGET.maxRssMiB },
    freshness: {
      value: freshness?.p99Value ?? null,
      met: freshness !== null && freshness.p99Value < TARGET.freshnessP99Ms,
    },
    correctness: { value: correctness.ok, met: correctness.ok },
  };
  const problems = [];
  if (!catchUp.caughtUp) problems.push(`the daemon did not catch up within ${CATCH_UP_TIMEOUT_MS / 1000} s`);
  if (catchUp.caughtUp && !catchUp.atHead)
    problems.push(`GET /api/v1/projections does not show lag 0 at the head: ${JSON.stringify(catchUp.projections)}`);
  if (!correctness.ok) problems.push('the read model differs from the baseline');
  if (logWarnings + logErrors > 0)
    problems.push(`${logErrors} errors, ${logWarnings} warnings logged (${logFile}): ${firstLogProblem}`);
  for (const [phase, activity] of [
    ['catch-up', catchUp.activity],
    ['freshness run', freshness?.activity],
  ]) {
    if (serverWideHorizon && activity && activity.foreignXactOver1sPct > 0) {
      problems.push(
        `during the ${phase}, a transaction of another database on this server was open > 1 s in ${activity.foreignXactOver1sPct} % of ` +
          `the samples (longest ${activity.foreignXactMaxSeconds} s): it holds back pg_snapshot_xmin, so the projector could not read newer events meanwhile`,
      );
    }
  }
  if (catchUp.cpu.otherPct > 25)
    problems.push(`other processes used ${catchUp.cpu.otherPct} % of a core during the catch-up: noisy`);
  if (baseline.cpu.otherPct > 25)
    problems.push(`other processes used ${baseline.cpu.otherPct} % of a core during the baseline: noisy`);
  if (freshness && freshness.cpu.otherPct > 25)
    problems.push(`other processes used ${freshness.cpu.otherPct} % of a core during the freshness run: noisy`);
  if (freshness?.readBacksStale > 0)
    problems.push(
      `${freshness.readBacksStale} deliveries seen on the change feed were not yet visible in GET /api/v1/products/{id}`,
    );
  if (freshness && freshness.accepted < freshness.deliveries)
    problems.push(
      `only ${freshness.accepted} of ${freshness.deliveries} deliveries answered 202: ${JSON.stringify(freshness.statuses)}`,
    );
  if (freshness && freshness.achievedRate < 0.95 * FRESHNESS_RATE)
    problems.push(`deliveries went out at ${freshness.achievedRate}/s, not ${FRESHNESS_RATE}/s`);
  return { checks, met: Object.values(checks).every((check) => check.met), problems };
}

function tables(
  { events, serverWideHorizon, filled, baseline, catchUp, correctness, freshness, ingressBaseline, poolerFreshness },
  verdict,
) {
  const products = correctness.perTable.find((row) => row.table === 'proj_menu.products');
  const yes = (met) => (met ? 'met' : 'NOT met');
  const out = [
    {
      title: `projection: fill (setup, not part of the result): ${events} events by INSERT … SELECT FROM generate_series`,
      columns: ['events', 'fill s', 'events/s', 'VACUUM ANALYZE s', 'event_log MiB', 'mean payload B'],
      rows: [
        [
          events,
          filled.fillSeconds,
          filled.eventsPerSec,
          filled.vacuumSeconds,
          filled.logTotalMiB,
          filled.meanPayloadBytes,
        ],
      ],
    },
    {
      title: `projection: catch-up over ${events} logged events (${products.baseline_live} live products)`,
      columns: [
        'target',
        'seconds',
        'events/s',
        'peak RSS MiB',
        'CPU node %',
        'CPU pg %',
        '(projector)',
        'CPU other %',
      ],
      rows: [
        [
          'baseline (set-based SQL, 8 tables)',
          baseline.seconds,
          baseline.eventsPerSec,
          '-',
          '-',
          baseline.cpu.postgresPct,
          '-',
          baseline.cpu.otherPct,
        ],
        [
          `daemon${catchUp.caughtUp ? '' : ' (NOT caught up)'}`,
          catchUp.seconds,
          catchUp.eventsPerSec,
          catchUp.peakRssMiB,
          catchUp.cpu.serverPct,
          catchUp.cpu.postgresPct,
          catchUp.cpu.postgresSubsetPct,
          catchUp.cpu.otherPct,
        ],
      ],
    },
    {
      title: 'projection: baseline per table',
      columns: ['table', 'rows', 'seconds'],
      rows: baseline.perTable.map((row) => [row.table, row.rows, row.seconds]),
    },
    {
      title: "projection: daemon catch-up rate by tenth of the log (menu projection's checkpoint)",
      columns: ['tenth', ...catchUp.byDecile.map((d) => `${d.decile * 10}%`)],
      rows: [['events/s', ...catchUp.byDecile.map((d) => d.eventsPerSec)]],
    },
    {
      title: `projection: what the projector's backend was doing during catch-up (${catchUp.activity.samples} samples of pg_stat_activity, every ${SAMPLE_MS} ms)`,
      columns: ['state / statement', '% of samples'],
      rows: activityRows(catchUp.activity),
    },
  ];
  if (freshness) {
    out.push({
      title: `projection: what the projector's backend was doing during the freshness run (${freshness.activity.samples} samples)`,
      columns: ['state / statement', '% of samples'],
      rows: activityRows(freshness.activity, 2),
    });
    out.push({
      title:
        `projection: freshness, 202 -> ${
          freshness.observe === 'feed'
            ? 'its change on the SSE feed /api/v1/changes (every 20th read back ' + 'through GET /api/v1/products/{id})'
            : `visible in GET /api/v1/products/{id}, polled every ${freshness.pollMs} ms`
        } (${freshness.rate} ` +
        `deliveries/s for ${freshness.seconds} s after a warm-up of ${freshness.warmupSeconds ?? 0} s at the same rate)`,
      columns: [
        'deliveries',
        '202',
        'rate/s',
        'p50 ms',
        'p90 ms',
        'p99 ms',
        'max ms',
        `> ${freshness.giveUpMs} ms`,
        'POST p50 ms',
        'POST p99 ms',
        'warm-up p99 ms',
        'GETs',
        'CPU srv %',
        'CPU pg %',
        'CPU gen %',
        'CPU other %',
        'horizon held %',
      ],
      rows: [
        [
          freshness.deliveries,
          freshness.accepted,
          freshness.achievedRate,
          freshness.p50Ms,
          freshness.p90Ms,
          freshness.p99Ms,
          freshness.maxMs,
          freshness.notVisible,
          freshness.postP50Ms,
          freshness.postP99Ms,
          freshness.warmup?.p99Ms ?? '-',
          freshness.polls,
          freshness.cpu.serverPct,
          freshness.cpu.postgresPct,
          freshness.cpu.loadGeneratorPct,
          freshness.cpu.otherPct,
          serverWideHorizon ? freshness.activity.foreignXactOver1sPct : '-',
        ],
      ],
    });
  }
  if (freshness) {
    const row = (name, f) => [
      name,
      f.accepted,
      f.postP50Ms,
      f.postP99Ms,
      round(Math.max(...f.bySecond.map((b) => Number(b.postMaxMs) || 0)), 1),
      f.bySecond.filter((b) => Number(b.postP99Ms) > 250).length,
      f.cpu.serverPct,
      f.cpu.otherPct,
    ];
    out.push({
      title:
        `projection: POST /webhooks at ${FRESHNESS_RATE}/s (paced), daemon (observed as above) next to the ingress baseline of this run ` +
        '(bench/baseline-server.js, same database, right after the daemon stopped, no polling)',
      columns: [
        'target',
        '202',
        'POST p50 ms',
        'POST p99 ms',
        'POST max ms',
        'seconds with p99 > 250 ms',
        'CPU srv %',
        'CPU other %',
      ],
      rows: [
        row('daemon', freshness),
        ...(poolerFreshness ? [row('daemon through PgBouncer', poolerFreshness)] : []),
        ...(ingressBaseline ? [row('ingress baseline', ingressBaseline)] : []),
      ],
    });
    const { waits, appendInDaemon } = freshness;
    out.push({
      title:
        `projection: during the freshness run: the daemon's appends (menu_sync_event_append_seconds: ${appendInDaemon.appends} appends, ` +
        `p50 ${appendInDaemon.p50Ms} ms, p99 ${appendInDaemon.p99Ms} ms, ${appendInDaemon.over1sPct} % over 1 s); server-wide ${waits.counters.checkpoints} ` +
        `checkpoint(s) ended, ${waits.counters.buffers_checkpoint} buffers written by checkpoints, ${waits.counters.walMiB} MiB of WAL; load average ${waits.loadAverage1m}`,
      columns: ['sampled every 50 ms', 'state', '% of samples'],
      rows: [
        ...Object.entries(waits.appendWaits).map(([wait, pct]) => ['append backend', wait, pct]),
        ...Object.entries(waits.checkpointerWaits).map(([wait, pct]) => ['checkpointer', wait, pct]),
      ],
    });
  }
  const { checks } = verdict;
  out.push({
    title: 'projection: targets',
    columns: ['measure', 'value', 'target', 'result'],
    rows: [
      [
        'catch-up events/s, daemon / baseline',
        `${checks.ratio.value}x`,
        `>= ${TARGET.minRatio}x`,
        yes(checks.ratio.met),
      ],
      ['daemon peak RSS (VmHWM) MiB', checks.rss.value, `< ${TARGET.maxRssMiB}`, yes(checks.rss.met)],
      [
        `freshness p99 ms at ${FRESHNESS_RATE}/s (after the warm-up)`,
        freshness ? freshness.p99Ms : 'not measured',
        `< ${TARGET.freshnessP99Ms}`,
        yes(checks.freshness.met),
      ],
      [
        `freshness p99 ms during the warm-up (the daemon's first seconds of traffic)`,
        freshness?.warmup?.p99Ms ?? '-',
        '-',
        '-',
      ],
      [
        'read model = baseline (8 tables, live rows)',
        correctness.ok ? 'equal' : 'DIFFERS',
        'equal',
        yes(checks.correctness.met),
      ],
    ],
  });
  return out;
}

/** The statements' shares, those under 0.5 % folded into one row. */
function activityRows(activity, minPct = 0.5) {
  const small = activity.byStatement.filter((row) => row.pct < minPct);
  const rows = activity.byStatement.filter((row) => row.pct >= minPct).map((row) => [row.label, row.pct]);
  if (small.length > 0)
    rows.push([
      `${small.length} others (< ${minPct} % each)`,
      round(
        small.reduce((sum, row) => sum + row.pct, 0),
        1,
      ),
    ]);
  return rows;
}

function round(value, digits) {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

function log(line) {
  process.stderr.write(`${line}\n`);
}

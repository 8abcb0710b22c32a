// Table sinks benchmark (issue 31):
//   (a) catch-up: a postgres and a mysql (MariaDB) table sink write N changes (1M by default) already in
//       the change log, batch 500, against a bare script that reads the same rows in the same batches and
//       runs the table clients' own write statements (imported from dist/) with no cursor row, egress
//       guard or attempt record, in the same run (target: daemon >= 0.5x the script); the daemon's peak
//       RSS during each catch-up (target < 300 MB);
//   (b) freshness: webhook 202 -> the product's row visible in the PostgreSQL target, at 200 deliveries/s
//       (target p99 < 300 ms).
//
//   fresh migrated database -> fill change_log with N changes by SQL (distinct products) -> VACUUM ANALYZE
//   -> PostgreSQL target: bare script, then a daemon's postgres sink
//   -> MariaDB target: bare script, then a fresh daemon's mysql sink -> that sink deleted, freshness on the
//      postgres sink (the same daemon).
//   BENCH_SINK_CHANGES shrinks N for a quick look. The targets' databases and users are dropped at the end.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { sampleCpu } from './lib/cpu.js';
import { createMigratedDatabase, databaseUrl, dropDatabase } from './lib/database.js';
import { freePort, memoryOf, startService, stopService, waitReady } from './lib/processes.js';
import { productUpdatedBody } from './lib/projection-events.js';
import { percentile } from './lib/projection-freshness.js';
import { createPostgresTarget, makePassword } from './lib/postgres-target.js';
import { fillProductChanges, postJson, sinkBenchEnv } from './lib/sink-changes.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const BATCH = 500;
const RATE = 200;
const TYPES = ['product'];
const WEBHOOK_KEY = 'bench-webhook-key-0123456789abcdef';
const MYSQL_ADMIN = { host: '127.0.0.1', port: 3306, user: 'root', password: '' };
const BARE_SCHEMA = 'bench_bare';
const SINK_SCHEMA = 'menu_sync';
const BARE_PREFIX = 'bench_bare_';
const SINK_PREFIX = 'menu_sync_';

export const description =
  'table-sinks: catch-up of 1M changes into PostgreSQL and MariaDB tables (batch 500) vs a bare script with the same statements; freshness 202 -> row in PostgreSQL at 200/s; peak RSS';
export const defaults = { duration: 20, warmup: 3, quietWait: 0 };

export async function run({ duration = defaults.duration, warmup = defaults.warmup, logDir }) {
  mkdirSync(logDir, { recursive: true });
  const changes = Number(process.env.BENCH_SINK_CHANGES ?? 1_000_000);
  const dist = await importDist();
  const env = sinkBenchEnv();
  const database = await createMigratedDatabase({ cwd: ROOT, env, suffix: 'tables' });
  const client = new pg.Client({ connectionString: databaseUrl(database), application_name: 'menu-sync-bench' });
  await client.connect();
  const cleanups = [];
  let daemon;
  try {
    const fillStarted = performance.now();
    await fillProductChanges(client, changes);
    const head = await headCursor(client, dist);
    log(`filled ${changes} changes in ${((performance.now() - fillStarted) / 1000).toFixed(1)} s`);

    const pgTarget = await createPostgresTarget(TYPES);
    cleanups.push(pgTarget.drop);
    const myTarget = await createMysqlTarget();
    cleanups.push(myTarget.drop);

    // PostgreSQL: bare script, then a daemon's postgres sink.
    const pgBare = await barePostgres(client, pgTarget, dist, changes);
    log(`bare script, PostgreSQL: ${rate(changes, pgBare.ms)} changes/s`);
    daemon = await startDaemon(env, database, join(logDir, 'table-sinks-daemon-postgres.log'));
    const pgSink = await catchUp(daemon, {
      body: { kind: 'postgres', url: pgTarget.url, schema: SINK_SCHEMA },
      head,
      targetCursor: (sinkId) => pgTarget.cursor(SINK_SCHEMA, sinkId),
    });
    log(`daemon postgres sink: ${rate(changes, pgSink.ms)} changes/s, peak RSS ${pgSink.peakRssMiB} MiB`);
    await checkRows(() => pgTarget.count(SINK_SCHEMA), changes, 'PostgreSQL sink table');
    const pgExit = await stopService(daemon.child);
    daemon = undefined;

    // MariaDB: bare script, then a fresh daemon (its own peak RSS) with a mysql sink.
    const myBare = await bareMysql(client, myTarget, dist, changes);
    log(`bare script, MariaDB: ${rate(changes, myBare.ms)} changes/s`);
    daemon = await startDaemon(env, database, join(logDir, 'table-sinks-daemon-mysql.log'));
    const mySink = await catchUp(daemon, {
      body: { kind: 'mysql', url: myTarget.url, table_prefix: SINK_PREFIX },
      head,
      targetCursor: (sinkId) => myTarget.cursor(sinkId),
      extraCpu: mariadbPid(),
    });
    log(`daemon mysql sink: ${rate(changes, mySink.ms)} changes/s, peak RSS ${mySink.peakRssMiB} MiB`);
    await checkRows(() => myTarget.count(`${SINK_PREFIX}products`), changes, 'MariaDB sink table');

    // Freshness on the postgres sink (at the head already), the mysql sink deleted first.
    const deleted = await fetch(`${daemon.base}/api/v1/sinks/${mySink.sinkId}`, { method: 'DELETE' });
    await deleted.arrayBuffer();
    if (deleted.status !== 204) throw new Error(`DELETE of the mysql sink answered ${deleted.status}`);
    const { rows: headRows } = await client.query(dist.NEWEST_CHANGE_POSITION);
    const changeLog = watchChangeLog(client, dist.changePosition(headRows[0]));
    const freshness = await measureFreshness(daemon, pgTarget, warmup, duration, changeLog.seen);
    await changeLog.stop();
    log(
      `freshness: p50 ${freshness.p50Ms} ms, p99 ${freshness.p99Ms} ms, max ${freshness.maxMs} ms over ${freshness.accepted}, ${freshness.missing} missing`,
    );
    const myExit = await stopService(daemon.child);
    daemon = undefined;

    const catchUpRows = [
      ['postgres', pgBare, pgSink],
      ['mariadb', myBare, mySink],
    ].map(([target, bare, sink]) => ({
      target,
      changes,
      bareSeconds: round(bare.ms / 1000),
      daemonSeconds: round(sink.ms / 1000),
      bareRate: rate(changes, bare.ms),
      daemonRate: rate(changes, sink.ms),
      ratio: round(bare.ms / sink.ms),
      daemonPeakRssMiB: sink.peakRssMiB,
      daemonStartRssMiB: sink.startRssMiB,
      daemonHeapNearPeak: sink.heapNearPeak,
      bareCpu: bare.cpu,
      daemonCpu: sink.cpu,
    }));
    const met = {
      catchUp: catchUpRows.every((row) => row.ratio >= 0.5),
      peakRss: catchUpRows.every((row) => row.daemonPeakRssMiB < 300),
      freshness: freshness.p99Ms !== null && freshness.p99Ms < 300 && freshness.missing === 0,
    };
    const cpuRow = (label, cpu) => [
      label,
      cpu.seconds,
      cpu.serverPct,
      cpu.postgresPct,
      cpu.targetPct ?? '-',
      cpu.otherPct,
      cpu.machineBusyPct,
    ];
    return {
      settings: {
        changes,
        batchSize: BATCH,
        types: TYPES,
        freshnessRate: RATE,
        freshnessWarmupSeconds: warmup,
        freshnessSeconds: duration,
        bare: 'keyset-paginated SELECT of 500 changes in (transaction_id, seq) order, toEntry and changesByType as the sink reader and clients do, then the clients’ own write statements (postgresWriteStatement / writeMysqlTable from dist/), autocommit, on one connection; no cursor row, no transaction around the batch, no egress guard, no attempt record',
        daemonClock:
          'from POST /api/v1/sinks (from "start") until the target’s cursor row holds the change log’s head (polled every 50 ms)',
      },
      catchUp: catchUpRows,
      freshness,
      exits: { postgres: pgExit, mysql: myExit },
      targetMet: met,
      tables: [
        {
          title: `Table sink catch-up of ${changes} changes, batch ${BATCH} (same run; target ratio >= 0.5, peak RSS < 300 MB)`,
          columns: [
            'target',
            'bare script s',
            'daemon sink s',
            'bare /s',
            'daemon /s',
            'ratio',
            'daemon RSS at start MiB',
            'daemon peak RSS MiB',
            'near peak: heap total / used / external MiB',
          ],
          rows: catchUpRows.map((row) => [
            row.target,
            row.bareSeconds,
            row.daemonSeconds,
            row.bareRate,
            row.daemonRate,
            row.ratio,
            row.daemonStartRssMiB,
            row.daemonPeakRssMiB,
            heapCell(row.daemonHeapNearPeak),
          ]),
        },
        {
          title:
            'Where the CPU went during each catch-up (% of one core; proc = the bare script or the daemon, pg = every postgres process on the machine, mariadb = mariadbd)',
          columns: ['run', 'seconds', 'proc %', 'pg %', 'mariadb %', 'other %', 'machine busy %'],
          rows: [
            cpuRow('postgres bare', pgBare.cpu),
            cpuRow('postgres daemon', pgSink.cpu),
            cpuRow('mariadb bare', myBare.cpu),
            cpuRow('mariadb daemon', mySink.cpu),
          ],
        },
        {
          title: `Freshness webhook 202 -> row visible in the PostgreSQL target at ${RATE}/s for ${duration} s (target p99 < 300 ms)`,
          columns: ['span', 'accepted', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'missing'],
          rows: [
            [
              '202 -> row in target',
              freshness.accepted,
              freshness.p50Ms,
              freshness.p90Ms,
              freshness.p99Ms,
              freshness.maxMs,
              freshness.missing,
            ],
            ['202 -> change log (projector)', '', ...spans(freshness.toChangeLog), ''],
            ['change log -> row (sink)', '', ...spans(freshness.changeLogToTarget), ''],
          ],
        },
      ],
    };
  } finally {
    if (daemon) await stopService(daemon.child);
    await client.end().catch(() => undefined);
    for (const cleanup of cleanups.reverse()) await cleanup().catch((error) => log(`cleanup failed: ${error.message}`));
    await dropDatabase(database);
  }
}

/** The statement builders and row readers of the daemon itself. */
async function importDist() {
  const load = (path) => import(join(ROOT, 'dist/src', path));
  const [postgres, mysqlClient, schema, batch, changeLog, cursor] = await Promise.all([
    load('sinks/tables/postgres-table.client.js'),
    load('sinks/tables/mysql-table.client.js'),
    load('sinks/tables/table-schema.js'),
    load('sinks/tables/table-batch.js'),
    load('changes/change-log.repository.js'),
    load('changes/change-cursor.js'),
  ]);
  return { ...postgres, ...mysqlClient, ...schema, ...batch, ...changeLog, ...cursor };
}

async function headCursor(client, dist) {
  const { rows } = await client.query(dist.NEWEST_CHANGE_POSITION);
  return dist.encodeChangeCursor(dist.changePosition(rows[0]));
}

/**
 * Records when each product id first shows in the change log after `after` (keyset reads on the
 * reader's index every 5 ms), to split freshness into 202 -> change log and change log -> target.
 */
function watchChangeLog(client, after) {
  const seen = new Map();
  let position = [after.transactionId, after.seq];
  let watching = true;
  const done = (async () => {
    while (watching) {
      const { rows } = await client.query(
        `SELECT transaction_id::text AS x, seq::text AS s, id FROM change_log
          WHERE (transaction_id, seq) > ($1::xid8, $2::bigint) ORDER BY transaction_id, seq LIMIT 1000`,
        position,
      );
      const now = performance.now();
      for (const row of rows) if (!seen.has(row.id)) seen.set(row.id, now);
      if (rows.length > 0) position = [rows.at(-1).x, rows.at(-1).s];
      await sleep(5);
    }
  })();
  return {
    seen,
    stop: async () => {
      watching = false;
      await done;
    },
  };
}

/** Pages of BATCH changes in reader order, as the sink reader gives them to a client. */
async function* pages(client, dist) {
  let after = ['0', '0'];
  for (;;) {
    const { rows } = await client.query(
      `SELECT ${dist.changeColumns('c')} FROM change_log c
        WHERE (c.transaction_id, c.seq) > ($1::xid8, $2::bigint) AND c.type = ANY($3)
        ORDER BY c.transaction_id, c.seq LIMIT $4`,
      [...after, TYPES, BATCH],
    );
    if (rows.length === 0) return;
    after = [rows.at(-1).transaction_id, rows.at(-1).seq];
    yield dist.changesByType(rows.map(dist.toEntry));
  }
}

/** The baseline for PostgreSQL: each page, per type one postgresWriteStatement, autocommit. */
async function barePostgres(client, target, dist, n) {
  const tables = dist.sinkTables(TYPES, '');
  await target.createTables(dist, BARE_SCHEMA);
  const writer = new pg.Client({ connectionString: target.url, application_name: 'menu-sync-bench' });
  await writer.connect();
  try {
    const result = await measured(process.pid, null, async () => {
      for await (const byType of pages(client, dist))
        for (const [type, list] of byType)
          await writer.query(
            dist.postgresWriteStatement(BARE_SCHEMA, tables.tables.get(type), tables.tombstones.name),
            [JSON.stringify(list.map((change) => dist.postgresInputRow(tables.tables.get(type), change))), type],
          );
    });
    await checkRows(() => target.count(BARE_SCHEMA), n, 'PostgreSQL bare table');
    return result;
  } finally {
    await writer.end();
  }
}

/** The baseline for MariaDB: each page, per type writeMysqlTable on one connection, autocommit. */
async function bareMysql(client, target, dist, n) {
  const tables = dist.sinkTables(TYPES, BARE_PREFIX);
  await target.createTables(dist, BARE_PREFIX);
  const writer = await mysql.createConnection({ ...target.options, database: target.database });
  try {
    const result = await measured(process.pid, mariadbPid(), async () => {
      const runStatement = (sql, values) => writer.query({ sql, values });
      for await (const byType of pages(client, dist))
        for (const [type, list] of byType)
          await dist.writeMysqlTable(runStatement, tables.tables.get(type), tables.tombstones.name, list);
    });
    await checkRows(() => target.count(`${BARE_PREFIX}products`), n, 'MariaDB bare table');
    return result;
  } finally {
    await writer.end();
  }
}

async function startDaemon(env, database, logFile) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = startService('node', ['dist/src/main.js', 'serve'], {
    cwd: ROOT,
    env: { ...env, DATABASE_URL: databaseUrl(database), PORT: String(port), WEBHOOK_KEYS: WEBHOOK_KEY },
    logFile,
  });
  await waitReady(child, `${base}/health/ready`, 180_000);
  return { child, base };
}

/**
 * A sink from the start, timed until the target's cursor row holds the head; the daemon's RSS is
 * sampled every 200 ms meanwhile (and its VmHWM read at the end). The sink's lag must then read 0.
 */
async function catchUp(daemon, { body, head, targetCursor, extraCpu = null }) {
  const startRssMiB = Math.round(memoryOf(daemon.child.pid).rssMiB);
  let peakRssMiB = 0;
  let sampling = true;
  // Where the memory sits at the RSS peak: the V8 heap (total, used) and memory outside it, from /metrics.
  let atPeak = null;
  let tick = 0;
  const sampler = (async () => {
    while (sampling) {
      const rss = memoryOf(daemon.child.pid).rssMiB;
      if (rss > peakRssMiB && tick++ % 5 === 0) atPeak = await heapOf(daemon.base).catch(() => atPeak);
      peakRssMiB = Math.max(peakRssMiB, rss);
      await sleep(200);
    }
  })();
  let sinkId;
  const result = await measured(daemon.child.pid, extraCpu, async () => {
    const created = await postJson(`${daemon.base}/api/v1/sinks`, {
      ...body,
      from: 'start',
      batch_size: BATCH,
      types: TYPES,
    });
    sinkId = created.data.id;
    for (;;) {
      const target = await targetCursor(sinkId);
      if (target === head) return;
      await sleep(50);
    }
  });
  sampling = false;
  await sampler;
  const hwm = memoryOf(daemon.child.pid).peakRssMiB;
  peakRssMiB = Math.round(Math.max(peakRssMiB, hwm));
  const sink = await (await fetch(`${daemon.base}/api/v1/sinks/${sinkId}`)).json();
  if (sink.data.lag !== 0) throw new Error(`sink ${sinkId} caught up but its lag reads ${sink.data.lag}`);
  if (sink.data.state !== 'active') throw new Error(`sink ${sinkId} is ${sink.data.state}: ${sink.data.last_error}`);
  return { ...result, sinkId, peakRssMiB, startRssMiB, heapNearPeak: atPeak };
}

/** The daemon's V8 heap and external memory in MiB, from its Prometheus default metrics. */
async function heapOf(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const value = (name) => {
    const match = new RegExp(`^menu_sync_${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
    return match ? Math.round(Number(match[1]) / 2 ** 20) : null;
  };
  return {
    rssMiB: value('process_resident_memory_bytes'),
    heapTotalMiB: value('nodejs_heap_size_total_bytes'),
    heapUsedMiB: value('nodejs_heap_size_used_bytes'),
    externalMiB: value('nodejs_external_memory_bytes'),
  };
}

/** Times fn; CPU of `pid`, of every postgres process, and of mariadbd when given. */
async function measured(pid, mariadb, fn) {
  const finish = sampleCpu(pid, null);
  const finishTarget = mariadb === null ? null : sampleCpu(mariadb, []);
  const started = performance.now();
  await fn();
  const ms = performance.now() - started;
  const cpu = finish();
  if (finishTarget) {
    cpu.targetPct = finishTarget().serverPct;
    cpu.otherPct = Math.max(0, Math.round(cpu.otherPct - cpu.targetPct));
  }
  return { ms, cpu };
}

function mariadbPid() {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const name = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      if (name === 'mariadbd' || name === 'mysqld') return Number(entry);
    } catch {
      // gone
    }
  }
  return null;
}

async function checkRows(count, expected, what) {
  const rows = await count();
  if (rows !== expected) throw new Error(`${what} holds ${rows} rows, expected ${expected}`);
}

/**
 * Deliveries of new products at RATE/s (the first `warmup` seconds not counted); per delivery, the
 * time from its 202 until its row is in the target, found by polling the target every 5 ms for the
 * ids still awaited.
 */
async function measureFreshness(daemon, target, warmup, seconds, inChangeLog) {
  const reader = new pg.Client({ connectionString: target.adminUrl, application_name: 'menu-sync-bench' });
  await reader.connect();
  const accepted = new Map();
  const pending = new Map();
  const seen = new Map();
  let polling = true;
  const poller = (async () => {
    while (polling || pending.size > 0) {
      if (pending.size > 0) {
        const ids = [...pending.keys()];
        const { rows } = await reader.query(
          `SELECT id FROM ${SINK_SCHEMA}.products WHERE owner_id = ANY($1) AND id = ANY($2)`,
          [[...new Set(ids.map((id) => pending.get(id)))], ids],
        );
        const now = performance.now();
        for (const { id } of rows) {
          seen.set(id, now);
          pending.delete(id);
        }
      }
      if (!polling && performance.now() > stopBy) break;
      await sleep(5);
    }
  })();
  let stopBy = Infinity;
  const started = performance.now();
  const sends = [];
  const total = RATE * (warmup + seconds);
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const id = String(5_000_000 + i);
    const { body } = productUpdatedBody(id, 10_000_000 + i);
    const ownerId = JSON.parse(body).data.relationships.resource_owner.data.id;
    const counted = i >= RATE * warmup;
    sends.push(
      fetch(`${daemon.base}/webhooks/${WEBHOOK_KEY}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      }).then(async (response) => {
        await response.arrayBuffer();
        if (response.status !== 202) return;
        pending.set(id, ownerId);
        if (counted) accepted.set(id, performance.now());
      }),
    );
  }
  await Promise.all(sends);
  stopBy = performance.now() + 5000;
  polling = false;
  await poller;
  await reader.end();
  const latencies = [];
  const toChangeLog = [];
  const fromChangeLog = [];
  let missing = 0;
  for (const [id, at] of accepted) {
    const arrived = seen.get(id);
    const logged = inChangeLog.get(id);
    if (arrived === undefined) missing++;
    else latencies.push(Math.max(0, arrived - at));
    if (logged !== undefined) toChangeLog.push(Math.max(0, logged - at));
    if (logged !== undefined && arrived !== undefined) fromChangeLog.push(Math.max(0, arrived - logged));
  }
  const ms = (value) => (value === null ? null : Math.round(value));
  const summary = (values) => {
    values.sort((a, b) => a - b);
    return {
      p50Ms: ms(percentile(values, 50)),
      p90Ms: ms(percentile(values, 90)),
      p99Ms: ms(percentile(values, 99)),
      maxMs: ms(values.at(-1) ?? null),
    };
  };
  return {
    accepted: accepted.size,
    missing,
    ...summary(latencies),
    toChangeLog: summary(toChangeLog),
    changeLogToTarget: summary(fromChangeLog),
  };
}

const suffix = () => `${process.pid}_${randomBytes(3).toString('hex')}`;

/** A database on the local MariaDB and a user with a password that may use only it. */
async function createMysqlTarget() {
  const name = `menu_sync_bench_target_${suffix()}`;
  const user = `msb_${randomBytes(6).toString('hex')}`;
  const password = makePassword();
  const root = await mysql.createConnection({ ...MYSQL_ADMIN, dateStrings: true, supportBigNumbers: true });
  await root.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
  for (const host of ['%', 'localhost', '127.0.0.1']) {
    await root.query(`CREATE USER ?@? IDENTIFIED BY ?`, [user, host, password]);
    await root.query(`GRANT ALL ON \`${name}\`.* TO ?@?`, [user, host]);
  }
  await root.query(`USE \`${name}\``);
  const options = {
    host: '127.0.0.1',
    port: 3306,
    user,
    password,
    charset: 'utf8mb4',
    timezone: 'Z',
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
  };
  return {
    url: `mysql://${user}:${encodeURIComponent(password)}@127.0.0.1:3306/${name}`,
    database: name,
    options,
    async createTables(dist, prefix) {
      const client = new dist.MysqlTableClient({
        target: { kind: 'mysql', host: '127.0.0.1', port: 3306, user, password, database: name, tls: 'disable' },
        resolve: async () => '127.0.0.1',
        timeoutMs: 30_000,
        tablePrefix: prefix,
      });
      try {
        await client.ensure(TYPES, dist.sinkTables(TYPES, prefix));
      } finally {
        await client.close();
      }
    },
    count: async (table) => Number((await root.query(`SELECT count(*) AS n FROM \`${table}\``))[0][0].n),
    cursor: async (sinkId) => {
      try {
        const [rows] = await root.query(`SELECT \`cursor\` FROM menu_sync_sink_cursors WHERE sink_id = ?`, [sinkId]);
        return rows[0]?.cursor ?? null;
      } catch (error) {
        if (error.code === 'ER_NO_SUCH_TABLE') return null;
        throw error;
      }
    },
    drop: async () => {
      await root.query(`DROP DATABASE IF EXISTS \`${name}\``);
      for (const host of ['%', 'localhost', '127.0.0.1']) await root.query(`DROP USER IF EXISTS ?@?`, [user, host]);
      await root.end();
    },
  };
}

const heapCell = (heap) => (heap ? `${heap.heapTotalMiB} / ${heap.heapUsedMiB} / ${heap.externalMiB}` : '-');
const spans = (s) => [s.p50Ms, s.p90Ms, s.p99Ms, s.maxMs];
const rate = (n, ms) => Math.round(n / (ms / 1000));
const round = (value) => Math.round(value * 100) / 100;
const log = (line) => process.stderr.write(`[table-sinks] ${line}\n`);

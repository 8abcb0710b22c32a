// Sinks benchmark (issue 14):
//   (a) freshness: webhook 202 -> receipt by an HTTP sink's target, at 200 deliveries/s (target p99 < 300 ms)
//   (b) catch-up: an HTTP sink and a NATS sink deliver N changes (1M by default) already in the change
//       log, against a bare script that reads the same rows in the same batches and POSTs / publishes
//       them (no signing, no state), measured in the same run (target: daemon >= 0.5x the script).
//
//   fresh migrated database -> fill change_log with N changes by SQL (distinct resources) -> VACUUM ANALYZE
//   -> baseline HTTP, then daemon HTTP sink; baseline JetStream, then daemon NATS sink -> freshness
//   BENCH_SINK_CHANGES shrinks N for a quick look.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { dirname } from 'node:path';
import { mkdirSync } from 'node:fs';
import pg from 'pg';
import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { createMigratedDatabase, databaseUrl, dropDatabase } from './lib/database.js';
import { freePort, startService, stopService, waitReady } from './lib/processes.js';
import { productUpdatedBody } from './lib/projection-events.js';
import { percentile } from './lib/projection-freshness.js';
import { fillProductChanges, postJson, sinkBenchEnv } from './lib/sink-changes.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const NATS_URL = process.env.BENCH_NATS_URL ?? 'nats://127.0.0.1:4222';
const BATCH = 100;
const RATE = 200;

export const description =
  'sinks: freshness webhook 202 -> HTTP sink receipt at 200/s; catch-up of 1M changes to HTTP and JetStream vs a bare script';
export const defaults = { duration: 10, quietWait: 0 };

export async function run({ duration = defaults.duration, logDir }) {
  mkdirSync(logDir, { recursive: true });
  const changes = Number(process.env.BENCH_SINK_CHANGES ?? 1_000_000);
  const env = sinkBenchEnv({ NATS_URL });
  const database = await createMigratedDatabase({ cwd: ROOT, env, suffix: 'sinks' });
  const client = new pg.Client({ connectionString: databaseUrl(database), application_name: 'menu-sync-bench' });
  await client.connect();
  const receiver = await startReceiver();
  const nc = await connect({ servers: NATS_URL });
  const jsm = await jetstreamManager(nc);
  const streams = [];
  let daemon;
  try {
    const fillStarted = performance.now();
    await fillProductChanges(client, changes);
    log(`filled ${changes} changes in ${((performance.now() - fillStarted) / 1000).toFixed(1)} s`);

    const baselineHttp = await timed(() => bareHttp(client, receiver, changes));
    log(`bare script, HTTP: ${rate(changes, baselineHttp)} changes/s`);
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    daemon = startService('node', ['dist/src/main.js', 'serve'], {
      cwd: ROOT,
      env: {
        ...env,
        DATABASE_URL: databaseUrl(database),
        PORT: String(port),
        WEBHOOK_KEYS: 'bench-webhook-key-0123456789abcdef',
      },
      logFile: join(logDir, 'sinks-daemon.log'),
    });
    await waitReady(daemon, `${base}/health/ready`, 180_000);
    const daemonHttp = await timed(async () => {
      receiver.reset(changes);
      await postJson(`${base}/api/v1/sinks`, {
        kind: 'http',
        url: receiver.url,
        from: 'start',
        batch_size: BATCH,
        types: ['product'],
      });
      await receiver.done;
    });
    log(
      `daemon http sink: ${rate(changes, daemonHttp)} changes/s (${((daemonHttp / baselineHttp) * 100).toFixed(0)} % of the time of the script)`,
    );

    const bareStream = `BENCH_BARE_${randomBytes(3).toString('hex')}`;
    const sinkStream = `BENCH_SINK_${randomBytes(3).toString('hex')}`;
    streams.push(bareStream, sinkStream);
    const baselineNats = await timed(() => bareNats(client, nc, jsm, bareStream, changes));
    log(`bare script, JetStream: ${rate(changes, baselineNats)} changes/s`);
    const daemonNats = await timed(async () => {
      await postJson(`${base}/api/v1/sinks`, {
        kind: 'nats',
        stream: sinkStream,
        subject_prefix: sinkStream.toLowerCase(),
        from: 'start',
        batch_size: BATCH,
        types: ['product'],
      });
      for (;;) {
        const info = await jsm.streams.info(sinkStream).catch(() => null);
        if (info && info.state.messages >= changes) return;
        await sleep(50);
      }
    });
    log(`daemon nats sink: ${rate(changes, daemonNats)} changes/s`);

    // (a) freshness: a fresh sink at the head; deliveries of new products, timed 202 -> receipt.
    const freshness = await measureFreshness(base, receiver, duration, client);
    log(
      `freshness: p50 ${freshness.p50Ms} ms, p99 ${freshness.p99Ms} ms, max ${freshness.maxMs} ms over ${freshness.accepted}, ${freshness.missing} missing`,
    );
    const exit = await stopService(daemon);
    daemon = undefined;
    const catchUp = [
      ['http', changes, baselineHttp, daemonHttp],
      ['jetstream', changes, baselineNats, daemonNats],
    ].map(([target, n, bare, sink]) => ({
      target,
      changes: n,
      bareSeconds: round(bare / 1000),
      daemonSeconds: round(sink / 1000),
      bareRate: rate(n, bare),
      daemonRate: rate(n, sink),
      ratio: round(bare / sink),
    }));
    const met =
      catchUp.every((row) => row.ratio >= 0.5) &&
      freshness.p99Ms !== null &&
      freshness.p99Ms < 300 &&
      freshness.missing === 0;
    return {
      settings: {
        changes,
        batchSize: BATCH,
        freshnessRate: RATE,
        freshnessSeconds: duration,
        natsUrl: NATS_URL,
        bare: 'one keyset-paginated SELECT per batch of 100 in (transaction_id, seq) order, then one POST {"data":[…]} (unsigned) / publishes with Nats-Msg-Id awaited per batch',
      },
      catchUp,
      freshness,
      exit,
      targetMet: met,
      tables: [
        {
          title: `Sink catch-up of ${changes} changes, batch ${BATCH} (same run; target ratio >= 0.5)`,
          columns: ['target', 'bare script s', 'daemon sink s', 'bare /s', 'daemon /s', 'ratio'],
          rows: catchUp.map((row) => [
            row.target,
            row.bareSeconds,
            row.daemonSeconds,
            row.bareRate,
            row.daemonRate,
            row.ratio,
          ]),
        },
        {
          title: `Freshness webhook 202 -> HTTP sink receipt at ${RATE}/s for ${duration} s (target p99 < 300 ms)`,
          columns: ['accepted', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'missing'],
          rows: [
            [freshness.accepted, freshness.p50Ms, freshness.p90Ms, freshness.p99Ms, freshness.maxMs, freshness.missing],
          ],
        },
      ],
    };
  } finally {
    if (daemon) await stopService(daemon);
    for (const stream of streams) await jsm.streams.delete(stream).catch(() => undefined);
    await nc.close().catch(() => undefined);
    await receiver.close();
    await client.end().catch(() => undefined);
    await dropDatabase(database);
  }
}

/** The baseline: read a batch, POST it, wait for the answer, next. */
async function bareHttp(client, receiver, n) {
  receiver.reset(n);
  let after = ['0', '0'];
  for (;;) {
    const { rows } = await client.query(
      `SELECT transaction_id::text AS x, seq::text AS s, change_id, type, id, owner_id, op, resource, at FROM change_log
        WHERE (transaction_id, seq) > ($1::xid8, $2::bigint) ORDER BY transaction_id, seq LIMIT $3`,
      [...after, BATCH],
    );
    if (rows.length === 0) break;
    after = [rows.at(-1).x, rows.at(-1).s];
    const body = JSON.stringify({ data: rows.map(({ x: _x, s, ...change }) => ({ seq: Number(s), ...change })) });
    const response = await fetch(receiver.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    await response.arrayBuffer();
  }
  await receiver.done;
}

async function bareNats(client, nc, jsm, stream, n) {
  await jsm.streams.add({ name: stream, subjects: [`${stream.toLowerCase()}.>`] });
  const js = jetstream(nc);
  let after = ['0', '0'];
  let sent = 0;
  while (sent < n) {
    const { rows } = await client.query(
      `SELECT transaction_id::text AS x, seq::text AS s, change_id, type, id, owner_id, op, resource, at FROM change_log
        WHERE (transaction_id, seq) > ($1::xid8, $2::bigint) ORDER BY transaction_id, seq LIMIT $3`,
      [...after, BATCH],
    );
    if (rows.length === 0) break;
    after = [rows.at(-1).x, rows.at(-1).s];
    await Promise.all(
      rows.map(({ x: _x, s, ...change }) =>
        js.publish(
          `${stream.toLowerCase()}.${change.owner_id}.${change.type}.${change.id}`,
          JSON.stringify({ seq: Number(s), ...change }),
          { msgID: change.change_id },
        ),
      ),
    );
    sent += rows.length;
  }
}

/** Counts received changes; resolves `done` at the expected count. Records receipt times by event id for freshness. */
async function startReceiver() {
  const arrivals = new Map();
  let expected = Infinity;
  let count = 0;
  let resolveDone;
  const server = createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const now = performance.now();
      const { data } = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      count += data.length;
      for (const change of data) arrivals.set(change.resource.version.event_id, now);
      response.writeHead(204).end();
      if (count >= expected) resolveDone?.();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const receiver = {
    url: `http://127.0.0.1:${server.address().port}/hook`,
    arrivals,
    done: Promise.resolve(),
    reset(n) {
      count = 0;
      expected = n;
      arrivals.clear();
      receiver.done = new Promise((resolve) => {
        resolveDone = resolve;
      });
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
  return receiver;
}

/**
 * Samples, every 200 ms until stopped, the sessions (of any database: `here` says whether of this
 * one) whose transaction has held an id for more than half a second, with the readers' horizon seen
 * then: one of this database holds event_log_horizon() back. Answers the longest of each statement.
 */
function watchTransactions(client) {
  const seen = new Map();
  let stopped = false;
  const sampling = (async () => {
    while (!stopped) {
      const { rows } = await client.query(
        `SELECT datname = current_database() AS here, application_name, backend_type, state, wait_event_type,
                wait_event, left(query, 200) AS query, extract(epoch FROM now() - xact_start)::float8 AS seconds,
                event_log_horizon()::text AS horizon, pg_current_snapshot()::text AS snapshot
           FROM pg_stat_activity
          WHERE pid <> pg_backend_pid() AND backend_xid IS NOT NULL AND now() - xact_start > interval '500 ms'`,
      );
      for (const row of rows) {
        const key = `${row.here} ${row.backend_type} ${row.application_name} ${row.query}`;
        if ((seen.get(key)?.seconds ?? 0) < row.seconds) seen.set(key, row);
      }
      await sleep(200);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await sampling;
      return [...seen.values()].sort((a, b) => b.seconds - a.seconds).slice(0, 5);
    },
  };
}

async function measureFreshness(base, receiver, seconds, client) {
  receiver.reset(Infinity);
  const created = await postJson(`${base}/api/v1/sinks`, {
    kind: 'http',
    url: receiver.url,
    from: 'start',
    batch_size: BATCH,
    types: ['product'],
  });
  // Let the new sink catch up with the log first (it starts from the start).
  for (;;) {
    const sink = await (await fetch(`${base}/api/v1/sinks/${created.data.id}`)).json();
    if (sink.data.lag === 0) break;
    await sleep(200);
  }
  const accepted = new Map();
  const holders = watchTransactions(client);
  const started = performance.now();
  const sends = [];
  for (let i = 0; i < RATE * seconds; i++) {
    const due = started + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const { eventId, body } = productUpdatedBody(String(5_000_000 + i), 10_000_000 + i);
    sends.push(
      fetch(`${base}/webhooks/bench-webhook-key-0123456789abcdef`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      }).then(async (response) => {
        await response.arrayBuffer();
        if (response.status === 202) accepted.set(eventId, performance.now());
      }),
    );
  }
  await Promise.all(sends);
  await sleep(3000);
  const held = await holders.stop();
  if (held.length > 0) log(`freshness: transactions with an id open > 0.5 s meanwhile: ${JSON.stringify(held)}`);
  const latencies = [];
  let missing = 0;
  for (const [eventId, at] of accepted) {
    const arrived = receiver.arrivals.get(eventId);
    if (arrived === undefined) missing++;
    else latencies.push(Math.max(0, arrived - at));
  }
  latencies.sort((a, b) => a - b);
  if (missing > 0) {
    // What the daemon says of where they are: the projector's position and the sink's state.
    const projections = await (await fetch(`${base}/api/v1/projections`)).json();
    const sink = await (await fetch(`${base}/api/v1/sinks/${created.data.id}`)).json();
    log(
      `freshness: ${missing} missing; projections ${JSON.stringify(projections.data)}; sink ${JSON.stringify(sink.data)}`,
    );
    // And what PostgreSQL says: the readers' horizon, and the sessions of this database holding a
    // transaction id or waiting, with what they run.
    const { rows: horizon } = await client.query(
      `SELECT event_log_horizon()::text AS horizon, pg_current_snapshot()::text AS snapshot`,
    );
    const { rows: sessions } = await client.query(
      `SELECT pid, application_name, state, backend_xid::text, backend_xmin::text, wait_event_type, wait_event,
              now() - xact_start AS in_transaction_for, left(query, 160) AS query
         FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()
          AND (backend_xid IS NOT NULL OR wait_event_type = 'Lock' OR state LIKE 'idle in transaction%')`,
    );
    log(`freshness: horizon ${JSON.stringify(horizon[0])}; sessions ${JSON.stringify(sessions)}`);
  }
  const ms = (value) => (value === null ? null : Math.round(value));
  return {
    accepted: accepted.size,
    missing,
    p50Ms: ms(percentile(latencies, 50)),
    p90Ms: ms(percentile(latencies, 90)),
    p99Ms: ms(percentile(latencies, 99)),
    maxMs: ms(latencies.at(-1) ?? null),
  };
}

async function timed(fn) {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

const rate = (n, ms) => Math.round(n / (ms / 1000));
const round = (value) => Math.round(value * 100) / 100;
const log = (line) => process.stderr.write(`[sinks] ${line}\n`);

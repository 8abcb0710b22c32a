// The two sinks `ingress --with-sinks` attaches to a daemon: an http sink whose target is a bare
// node:http receiver (bench/lib/http-receiver.js, a process of its own, answering 204), and a
// postgres table sink into a target database on the local PostgreSQL with a role of its own.
import { join, dirname } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { admin } from './database.js';
import { createPostgresTarget } from './postgres-target.js';
import { freePort, startService, stopService, waitReady } from './processes.js';
import { postJson } from './sink-changes.js';

const HERE = dirname(fileURLToPath(import.meta.url));
/** The daemon's egress guard refuses loopback targets unless these are allowed. */
export const SINK_NETWORKS = { SINK_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128' };
const SCHEMA = 'menu_sync';

/**
 * Starts the receiver, makes the target database, and creates both sinks on the daemon at `base`
 * (from the start of the change log, every other setting at its default).
 */
export async function attachSinks({ base, logFile, trackArrivals = false }) {
  const target = await createPostgresTarget(['product']);
  const port = await freePort();
  const receiverUrl = `http://127.0.0.1:${port}`;
  const receiver = startService('node', [join(HERE, 'http-receiver.js')], {
    env: { ...process.env, PORT: String(port), TRACK_ARRIVALS: trackArrivals ? '1' : '0' },
    logFile,
  });
  const close = async () => {
    await stopService(receiver);
    await target.drop();
  };
  try {
    await waitReady(receiver, `${receiverUrl}/stats`);
    const http = await postJson(`${base}/api/v1/sinks`, { kind: 'http', url: `${receiverUrl}/hook`, from: 'start' });
    const table = await postJson(`${base}/api/v1/sinks`, {
      kind: 'postgres',
      url: target.url,
      schema: SCHEMA,
      from: 'start',
    });
    const sinks = [
      { name: 'http', id: http.data.id },
      { name: 'postgres', id: table.data.id },
    ];
    return {
      sinks,
      receiverPid: receiver.pid,
      target,
      schema: SCHEMA,
      /** The target database's backends (the table sink's sessions), for the CPU sample. */
      targetPids: async () =>
        (await admin(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [target.database])).rows.map((r) => r.pid),
      receiverStats: async () => (await fetch(`${receiverUrl}/stats`)).json(),
      arrivals: async () => (await fetch(`${receiverUrl}/arrivals`)).json(),
      lags: () => lags(base, sinks),
      catchUp: (options) => catchUp(base, sinks, options),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

async function getJson(url) {
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  const body = await response.json();
  if (!response.ok) throw new Error(`${url}: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

/** Where the projector and each sink stand: the projections' lag (events), each sink's lag (changes) and state. */
async function lags(base, sinks) {
  const projections = (await getJson(`${base}/api/v1/projections`)).data;
  const projectorLag = Math.max(...projections.map((p) => p.lag));
  const out = { projectorLag, sinks: {} };
  for (const sink of sinks) {
    const { data } = await getJson(`${base}/api/v1/sinks/${sink.id}`);
    out.sinks[sink.name] = { lag: data.lag, state: data.state, lastError: data.last_error };
  }
  return out;
}

/**
 * After the load stopped: what each sink had left (the projector's lag in events, each sink's in
 * changes) and the seconds until it was caught up, i.e. its lag read 0 after the projector's had
 * (every accepted delivery projected, every change delivered). Polls every 100 ms.
 */
async function catchUp(base, sinks, { timeoutMs = 120_000 } = {}) {
  const started = performance.now();
  const atStop = await lags(base, sinks);
  const seconds = {};
  let projectorSeconds = atStop.projectorLag === 0 ? 0 : null;
  let now = atStop;
  for (;;) {
    const elapsed = (performance.now() - started) / 1000;
    if (projectorSeconds === null && now.projectorLag === 0) projectorSeconds = elapsed;
    for (const sink of sinks) {
      if (seconds[sink.name] === undefined && projectorSeconds !== null && now.sinks[sink.name].lag === 0)
        seconds[sink.name] = elapsed;
    }
    if (sinks.every((sink) => seconds[sink.name] !== undefined)) break;
    if (elapsed * 1000 > timeoutMs) break;
    await sleep(100);
    now = await lags(base, sinks);
  }
  const round = (value) => (value === undefined || value === null ? null : Math.round(value * 100) / 100);
  return {
    projector: { lagAtStop: atStop.projectorLag, secondsToCaughtUp: round(projectorSeconds) },
    sinks: Object.fromEntries(
      sinks.map((sink) => [
        sink.name,
        {
          lagAtStop: atStop.sinks[sink.name].lag,
          secondsToCaughtUp: round(seconds[sink.name]),
          state: now.sinks[sink.name].state,
          lastError: now.sinks[sink.name].lastError,
        },
      ]),
    ),
  };
}

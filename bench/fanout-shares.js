// Fan-out across processes (issue 39): N http sinks of one store each, shared by three processes on
// one database, each holding the `sinks` role (the first also ingress, api and projector):
//   -> the N sinks made through the API, then each process's share of the leases (menu_sync_sinks_leased)
//      once they settle: even within ±10 %?
//   -> paced product.updated deliveries over the N stores; mid-load, `kill -9` of the third process:
//      seconds until the other two hold every sink again, and, at the end, every accepted delivery
//      at its store's sink (missing must be 0; duplicates allowed, at least once).
// Each process's CPU and RSS from /proc. The receiver is bench/lib/fanout-receiver.js, a process of its own.
import { performance } from 'node:perf_hooks';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import { cloneDatabase, createMigratedDatabase, databaseUrl, dropDatabase } from './lib/database.js';
import { freePort, memoryOf, startService, stopService, waitReady } from './lib/processes.js';
import { sinkBenchEnv } from './lib/sink-changes.js';
import { createSink, pool, processTicks, productUpdated, ticksPerSecond } from './fanout.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const KEY = `fanout-shares-key-${randomUUID()}`;
const CREATE_CONCURRENCY = 16;
const DRAIN_MS = 120_000;

export const description =
  'fan-out over three processes: each one’s share of N per-store http sinks (even within ±10 %?), the seconds a kill -9 of one leaves its sinks unserved, missing deliveries (must be 0)';

export const defaults = { sizes: [10_000], rate: 50, duration: 40, processes: 3 };

const log = (line) => console.log(`  ${new Date().toISOString().slice(11, 19)} ${line}`);
const round = (value, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;

export async function run({ sizes = defaults.sizes, rate = defaults.rate, duration = defaults.duration, logDir }) {
  const env = sinkBenchEnv({ WEBHOOK_KEYS: KEY, LOG_LEVEL: 'warn' });
  const template = await createMigratedDatabase({ cwd: ROOT, env, suffix: 'fanout_shares' });
  const results = [];
  try {
    for (const n of sizes) results.push(await measure({ env, template, logDir, n, rate, duration }));
  } finally {
    await dropDatabase(template);
  }
  return {
    results,
    tables: [
      {
        title: `fanout shares: N per-store http sinks over 3 processes (the first with ingress, api, projector), ${rate} deliveries/s, kill -9 of the third mid-load`,
        columns: [
          'N',
          'leases per process',
          'largest share off even',
          'even ±10 %',
          'kill -9 → all leased again s',
          'after: leases per process',
          'accepted',
          'missing',
          'duplicates',
          'CPU % per process (load)',
          'RSS MiB per process',
        ],
        rows: results.map((r) => [
          r.n,
          r.shares.join(' / '),
          `${r.offEvenPct} %`,
          r.offEvenPct <= 10 ? 'met' : 'NOT met',
          r.resumeSeconds,
          r.sharesAfter.join(' / '),
          r.accepted,
          r.missing,
          r.duplicates,
          r.cpuPct.join(' / '),
          r.rssMiB.join(' / '),
        ]),
      },
    ],
  };
}

async function measure({ env, template, logDir, n, rate, duration }) {
  const database = await cloneDatabase(template, `shares_${n}`);
  const started = [];
  const cleanup = [];
  try {
    const receiverPort = await freePort();
    const receiverUrl = `http://127.0.0.1:${receiverPort}`;
    const receiver = startService('node', [join(HERE, 'lib/fanout-receiver.js')], {
      env: { ...process.env, PORT: String(receiverPort) },
      logFile: join(logDir, `fanout-shares-receiver-${n}.log`),
    });
    cleanup.push(() => stopService(receiver));
    await waitReady(receiver, `${receiverUrl}/stats`);
    const roles = ['ingress,api,projector,sinks', 'sinks', 'sinks'];
    for (const [i, role] of roles.entries()) {
      const port = await freePort();
      const daemon = startService('node', ['dist/src/main.js', 'serve'], {
        cwd: ROOT,
        env: { ...env, DATABASE_URL: databaseUrl(database), PORT: String(port), ROLES: role },
        logFile: join(logDir, `fanout-shares-${n}-p${i}.log`),
      });
      started.push({ daemon, base: `http://127.0.0.1:${port}` });
      await waitReady(daemon, `http://127.0.0.1:${port}/health/live`, 60_000);
    }
    const api = started[0].base;
    const createdAt = performance.now();
    await pool(n, CREATE_CONCURRENCY, (i) =>
      createSink(api, {
        kind: 'http',
        url: `${receiverUrl}/r/store-${i}`,
        owner_ids: [`store-${i}`],
        types: ['product'],
        from: 'now',
      }),
    );
    log(`N=${n}: ${n} sinks created in ${round((performance.now() - createdAt) / 1000, 2)} s`);
    const shares = await settledShares(started, n);
    const offEvenPct = round((Math.max(...shares.map((s) => Math.abs(s - n / 3))) / (n / 3)) * 100, 1);
    log(`N=${n}: leases ${shares.join(' / ')} (largest ${offEvenPct} % off even)`);

    const cpuBefore = started.map(({ daemon }) => processTicks(daemon.pid));
    const cpuAt = performance.now();
    const load = paced({ base: api, stores: n, rate, seconds: duration });
    await sleep((duration * 1000) / 2);
    const victim = started[2];
    const victimCpu = processTicks(victim.daemon.pid);
    const rssMiB = started.map(({ daemon }) => round(memoryOf(daemon.pid).rssMiB, 0));
    victim.daemon.kill('SIGKILL');
    const killedAt = performance.now();
    const survivors = started.slice(0, 2);
    let resumeSeconds = null;
    for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
      const leased = await Promise.all(survivors.map(({ base }) => leasedOf(base)));
      if (leased.reduce((a, b) => a + b, 0) >= n) {
        resumeSeconds = round((performance.now() - killedAt) / 1000, 2);
        break;
      }
      await sleep(100);
    }
    log(`N=${n}: kill -9 of the third process; the other two held every sink after ${resumeSeconds} s`);
    const accepted = await load;
    const seconds = (performance.now() - cpuAt) / 1000;
    const cpuPct = started.map(({ daemon }, i) =>
      round((((i === 2 ? victimCpu : processTicks(daemon.pid)) - cpuBefore[i]) / ticksPerSecond / seconds) * 100, 1),
    );
    const sharesAfter = await Promise.all(survivors.map(({ base }) => leasedOf(base)));
    const ids = new Set(accepted.map(String));
    let arrivals = null;
    for (const deadline = Date.now() + DRAIN_MS; Date.now() < deadline;) {
      arrivals = await (await fetch(`${receiverUrl}/arrivals`)).json();
      const got = Object.keys(arrivals.store).filter((id) => ids.has(id)).length;
      if (got >= ids.size) break;
      await sleep(250);
    }
    const missing = [...ids].filter((id) => arrivals.store[id] === undefined).length;
    log(
      `N=${n}: ${ids.size} accepted, ${missing} missing, ${arrivals.duplicates} duplicates, ${arrivals.misrouted} misrouted`,
    );
    return {
      n,
      shares,
      offEvenPct,
      resumeSeconds,
      sharesAfter,
      accepted: ids.size,
      missing,
      duplicates: arrivals.duplicates,
      misrouted: arrivals.misrouted,
      cpuPct,
      rssMiB,
    };
  } finally {
    for (const { daemon } of started) await stopService(daemon);
    for (const step of cleanup.reverse()) await step().catch(() => undefined);
    await dropDatabase(database);
  }
}

/** Each process's leases once the total is N and no process's count moved for 5 s (60 s at most). */
async function settledShares(processes, n) {
  let last = null;
  let stableSince = performance.now();
  for (const deadline = Date.now() + 120_000; Date.now() < deadline;) {
    const shares = await Promise.all(processes.map(({ base }) => leasedOf(base)));
    const key = shares.join(',');
    if (key !== last) {
      last = key;
      stableSince = performance.now();
    } else if (shares.reduce((a, b) => a + b, 0) >= n && performance.now() - stableSince > 5000) return shares;
    await sleep(500);
  }
  throw new Error(`the leases did not settle: ${last} of ${n}`);
}

async function leasedOf(base) {
  try {
    const text = await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    return Number(/^menu_sync_sinks_leased (\S+)$/m.exec(text)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** product.updated deliveries of a new product of a random store each, `rate` a second for `seconds`; the accepted product ids. */
async function paced({ base, stores, rate, seconds }) {
  const accepted = [];
  const started = performance.now();
  const sends = [];
  for (let k = 0; k < rate * seconds; k++) {
    const due = started + (k * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const productId = 1_000_000 + k;
    const owner = `store-${Math.floor(Math.random() * stores)}`;
    sends.push(
      fetch(`${base}/webhooks/${KEY}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: productUpdated(productId, owner, k + 1),
      })
        .then(async (response) => {
          await response.arrayBuffer();
          if (response.status === 202) accepted.push(productId);
        })
        .catch(() => undefined),
    );
  }
  await Promise.all(sends);
  return accepted;
}

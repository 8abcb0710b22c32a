// What bench/reconcile.js does to a daemon and the fake platform: connect every user through the
// real OAuth flow, make the daemon learn each store from an order.created webhook, and run
// `menu-sync reconcile` as a child process whose CPU is read from /proc while it runs.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { memoryOf } from './processes.js';

let ticksPerSecond = 100;
try {
  ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  // keep the usual 100
}

/** GET /auth/connect, the platform's approval, the callback: one connection per call (the platform approves its users in turn). */
export async function connectUser(base) {
  const start = await fetch(`${base}/auth/connect`, { redirect: 'manual' });
  await start.arrayBuffer();
  const approved = await fetch(start.headers.get('location'), { redirect: 'manual' });
  await approved.arrayBuffer();
  const callback = await fetch(approved.headers.get('location'), { redirect: 'manual' });
  const text = await callback.text();
  if (callback.status !== 200) throw new Error(`the callback answered ${callback.status}: ${text.slice(0, 300)}`);
}

/** An order.created event of `user` at `store`: the daemon learns the store from it (reference §8). */
function orderEvent(user, store, seq, uri) {
  const orderId = String(5_000_000 + Number(store));
  const lineId = String(6_000_000 + Number(store));
  const money = (cents) => ({ cents, format: `£${(cents / 100).toFixed(2)}`, currency: { iso_code: 'GBP' } });
  const at = '2024-05-01T10:00:00.000Z';
  const included = [
    { id: user, type: 'user', attributes: { id: Number(user) }, relationships: {} },
    {
      id: orderId,
      type: 'order',
      attributes: {
        id: Number(orderId),
        note: null,
        due_at: at,
        'for_pickup?': false,
        status: 'pending',
        created_at: at,
        'order_dependencies_are_present_and_available_for_reorder?': true,
        delivery_method: { type: 'eat_in', table: 'T1' },
        subtotal: money(850),
        total: money(850),
        history: [{ transitioned_at_human: 'just now', status: 'pending', transitioned_at: at, most_recent: true }],
      },
      relationships: {
        order_products: { data: [{ id: lineId, type: 'order_product' }] },
        store: { data: { id: store, type: 'store' } },
        user: { data: { id: user, type: 'user' } },
        table: { data: null },
        feedback: { data: null },
      },
    },
    {
      id: lineId,
      type: 'order_product',
      attributes: { id: Number(lineId), note: null, quantity: 1, total: 850, unit_total: 850, cost: money(850) },
      relationships: {
        product: { data: { id: String(1_000_000 + Number(store) * 10), type: 'product' } },
        order_product_trait_options: { data: [] },
      },
    },
    {
      id: store,
      type: 'store',
      attributes: { id: Number(store), title: `Store ${store}`, status: 'open', demo: false, active: true },
      relationships: { photos: { data: [] }, tables: { data: [] }, loyalty_scheme: { data: null } },
    },
  ];
  return JSON.stringify({
    data: {
      id: randomUUID(),
      type: 'webhook_event',
      attributes: { id: seq, created_at: new Date().toISOString(), event_type: 'order.created', uri },
      relationships: {
        subject: { data: { id: orderId, type: 'order' } },
        resource_owner: { data: { id: user, type: 'user' } },
      },
    },
    included,
  });
}

/** One order.created per store, `parallel` at a time, to each user's callback URI; every answer must be 202. */
export async function learnStores(platform, users, parallel = 16) {
  const work = users.flatMap((user) => user.stores.map((store) => ({ user: user.id, store })));
  let next = 0;
  const deliver = async () => {
    while (next < work.length) {
      const { user, store } = work[next];
      next++;
      const uri = platform.callbacks.get(user);
      const answer = await fetch(uri, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: orderEvent(user, store, next, uri),
      });
      const text = await answer.text();
      if (answer.status !== 202) throw new Error(`the webhook answered ${answer.status}: ${text.slice(0, 300)}`);
    }
  };
  await Promise.all(Array.from({ length: parallel }, deliver));
}

/** Waits until every projection has applied the whole log. */
export async function projected(base, timeoutMs = 600_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const answer = await fetch(`${base}/api/v1/projections`);
    const { data } = await answer.json();
    if (data.every((projection) => projection.lag === 0 && projection.parked === 0)) return;
    await sleep(500);
  }
  throw new Error('the projections did not catch up');
}

function ticksOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}

/**
 * `menu-sync reconcile` with `env`: its printed run, its wall time, its CPU in ms and its peak RSS
 * (read from /proc every 50 ms while it runs: the last few ms before it exits are not counted).
 */
export async function reconcileOnce({ root, env, args = [] }) {
  const started = performance.now();
  const child = spawn('node', ['dist/src/main.js', 'reconcile', '--wait', '0', ...args], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr = (stderr + chunk).slice(-20_000)));
  let ticks = 0;
  let peakRssMiB = 0;
  const poll = setInterval(() => {
    ticks = ticksOf(child.pid) ?? ticks;
    peakRssMiB = Math.max(peakRssMiB, memoryOf(child.pid).peakRssMiB || 0);
  }, 50);
  const code = await new Promise((resolve) => child.on('exit', resolve));
  clearInterval(poll);
  const seconds = (performance.now() - started) / 1000;
  const document = /^\{\n[\s\S]*?^\}$/m.exec(stdout);
  if (!document) throw new Error(`reconcile printed no run (exit ${code}):\n${stderr.slice(-3000)}`);
  return { run: JSON.parse(document[0]).data, code, seconds, cpuMs: (ticks / ticksPerSecond) * 1000, peakRssMiB };
}

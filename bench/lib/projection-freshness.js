// Freshness: paced product.updated deliveries to POST /webhooks/{key}; after each 202, GET
// /api/v1/products/{id} every few ms until the product shows the delivery's data.id as its version.
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { productUpdatedBody } from './projection-events.js';

/** One HTTP exchange on a keep-alive agent; resolves with the status and the body text. */
function exchange(agent, base, method, path, body) {
  return new Promise((resolve, reject) => {
    const request = http.request(
      `${base}${path}`,
      {
        agent,
        method,
        timeout: 10_000,
        headers:
          body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (response) => {
        const chunks = [];
        response.on('data', (chunk) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode, text: Buffer.concat(chunks).toString('utf8') }),
        );
        response.on('error', reject);
      },
    );
    request.on('timeout', () => request.destroy(new Error(`${method} timed out`)));
    request.on('error', reject);
    request.end(body);
  });
}

const round1 = (value) => (value === null ? null : value === Infinity ? 'never' : Math.round(value * 10) / 10);

export function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/**
 * Follows GET /api/v1/changes as Server-Sent Events from the head: one connection, whose cost does
 * not grow with how late the changes are (polling each delivery does: every late one adds 100 GETs/s).
 * A change is written in the transaction that changes the read model (docs/reference.md §11), so its
 * arrival is no earlier than its visibility in the API; the read-backs check that.
 */
async function openFeed(base) {
  const head = await new Promise((resolve, reject) => {
    http
      .get(`${base}/api/v1/products?limit=1`, (response) => {
        response.resume();
        response.on('end', () => resolve(response.headers['x-changes-cursor']));
      })
      .on('error', reject);
  });
  if (!head) throw new Error('the daemon answered no X-Changes-Cursor: cannot follow the change feed');
  const listeners = [];
  const request = http.get(`${base}/api/v1/changes?after=${encodeURIComponent(head)}&type=product`, {
    headers: { accept: 'text/event-stream' },
  });
  await new Promise((resolve, reject) => {
    request.on('error', reject);
    request.on('response', (response) => {
      if (response.statusCode !== 200) reject(new Error(`GET /api/v1/changes (SSE) answered ${response.statusCode}`));
      let buffered = '';
      response.setEncoding('utf8');
      response.on('data', (text) => {
        const at = performance.now();
        buffered += text;
        let end;
        while ((end = buffered.indexOf('\n\n')) >= 0) {
          const frame = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          const data = frame
            .split('\n')
            .filter((line) => line.startsWith('data:'))
            .map((line) => line.slice(5).trimStart())
            .join('\n');
          if (data === '') continue;
          const eventId = JSON.parse(data).resource?.version?.event_id;
          if (eventId !== undefined) for (const listener of listeners) listener(eventId, at);
        }
      });
      resolve();
    });
  });
  return { early: new Map(), onChange: (listener) => listeners.push(listener), close: () => request.destroy() };
}

/**
 * Sends `rate` deliveries per second for `warmupSeconds` + `seconds` (one every 1000/rate ms, on
 * schedule), each for a product not used by any other delivery, and measures 202 → visible in the
 * API. A delivery not visible after giveUpMs counts as slower than that. The warm-up's deliveries
 * (a daemon's first requests after its catch-up: cold code paths and caches) are reported apart
 * (`warmup`), not in the percentiles; `bySecond` shows every second. `onAccepted` hears of each
 * 202 ({ id, eventId, acceptedAt: performance.now(), warmup }), for spans measured elsewhere.
 */
export async function measureFreshness({
  base,
  webhookKey,
  products,
  rate,
  seconds,
  warmupSeconds = 0,
  pollMs = 10,
  giveUpMs = 2000,
  firstSeq,
  poll = true,
  observe = 'poll',
  checkEvery = 20,
  onAccepted,
}) {
  // Two agents: the deliveries must not wait for a socket behind the polls (when visibility slows,
  // hundreds of polls are in flight, and one shared agent's queue made the POST look slow).
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  const postAgent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  const warmups = Math.round(rate * warmupSeconds);
  const total = warmups + Math.round(rate * seconds);
  if (products.length < total) throw new Error(`freshness needs ${total} distinct products, has ${products.length}`);
  const deliveries = [];
  let polls = 0;
  let pollErrors = 0;
  const feed = poll && observe === 'feed' ? await openFeed(base) : null;
  /** Feed mode: a delivery whose 202 came before its change (the usual order), by event id. */
  const awaiting = new Map();
  const checks = { done: 0, stale: 0, inFlight: [] };
  feed?.onChange((eventId, at) => {
    const record = awaiting.get(eventId);
    if (record === undefined) {
      feed.early.set(eventId, at);
      return;
    }
    awaiting.delete(eventId);
    seen(record, at);
  });

  /** The change reached the feed at `at`; every checkEvery-th one is also read back through the API, which must show it already. */
  function seen(record, at) {
    record.visibleMs = Math.max(0, at - record.acceptedAt);
    record.seen?.();
    if (record.index % checkEvery !== 0) return;
    checks.done++;
    polls++;
    checks.inFlight.push(
      exchange(agent, base, 'GET', `/api/v1/products/${record.id}`)
        .then((product) => {
          if (product.status !== 200 || JSON.parse(product.text).version?.event_id !== record.eventId) checks.stale++;
        })
        .catch(() => pollErrors++),
    );
  }

  async function deliver(k) {
    const id = products[k];
    const { eventId, body } = productUpdatedBody(id, firstSeq + k);
    const sent = performance.now();
    const record = {
      index: k,
      id,
      eventId,
      warmup: k < warmups,
      status: null,
      sentMs: sent - start,
      postMs: null,
      acceptedAt: null,
      visibleMs: null,
      error: null,
    };
    deliveries.push(record);
    try {
      const answer = await exchange(postAgent, base, 'POST', `/webhooks/${webhookKey}`, body);
      record.status = answer.status;
      const accepted = performance.now();
      record.acceptedAt = accepted;
      record.postMs = accepted - sent;
      if (answer.status === 202) onAccepted?.({ id, eventId, acceptedAt: accepted, warmup: record.warmup });
      if (answer.status !== 202 || !poll) return;
      if (feed) {
        const early = feed.early.get(eventId);
        if (early !== undefined) {
          feed.early.delete(eventId);
          seen(record, early);
          return;
        }
        await new Promise((resolve) => {
          record.seen = resolve;
          awaiting.set(eventId, record);
          setTimeout(resolve, giveUpMs);
        });
        awaiting.delete(eventId);
        return;
      }
      while (performance.now() - accepted < giveUpMs) {
        const started = performance.now();
        polls++;
        try {
          const product = await exchange(agent, base, 'GET', `/api/v1/products/${id}`);
          if (product.status === 200 && JSON.parse(product.text).version?.event_id === eventId) {
            record.visibleMs = performance.now() - accepted;
            return;
          }
        } catch {
          pollErrors++;
        }
        await sleep(Math.max(0, started + pollMs - performance.now()));
      }
    } catch (error) {
      record.error = error.message;
    }
  }

  const interval = 1000 / rate;
  const pending = [];
  const start = performance.now();
  for (let k = 0; k < total; k++) {
    const due = start + k * interval;
    const wait = due - performance.now();
    if (wait >= 1) await sleep(wait);
    pending.push(deliver(k));
  }
  const sendSeconds = (performance.now() - start) / 1000 - warmupSeconds;
  await Promise.all(pending);
  await Promise.all(checks.inFlight);
  feed?.close();
  agent.destroy();
  postAgent.destroy();
  const summary = {
    ...summarize(
      deliveries.filter((d) => !d.warmup),
      { rate, seconds, pollMs, giveUpMs, sendSeconds, poll },
    ),
    observe,
    ...(feed ? { readBacks: checks.done, readBacksStale: checks.stale } : {}),
  };
  const bySecond = perSecond(deliveries, warmupSeconds + seconds, poll);
  if (warmups === 0) return { ...summary, polls, pollErrors, bySecond };
  const warmup = summarize(
    deliveries.filter((d) => d.warmup),
    { rate, seconds: warmupSeconds, pollMs, giveUpMs, sendSeconds: warmupSeconds, poll },
  );
  return {
    ...summary,
    warmupSeconds,
    warmup: {
      deliveries: warmup.deliveries,
      p50Ms: warmup.p50Ms,
      p99Ms: warmup.p99Ms,
      maxMs: warmup.maxMs,
      postP99Ms: warmup.postP99Ms,
    },
    polls,
    pollErrors,
    bySecond,
  };
}

/** Per second of the run (by send time): where the slow ones cluster. */
function perSecond(deliveries, seconds, poll) {
  const bySecond = [];
  for (let second = 0; second < Math.ceil(seconds); second++) {
    const inSecond = deliveries.filter((d) => Math.floor(d.sentMs / 1000) === second);
    const postMs = inSecond
      .filter((d) => d.postMs !== null)
      .map((d) => d.postMs)
      .sort((a, b) => a - b);
    const visibleMs = inSecond
      .filter((d) => d.status === 202)
      .map((d) => d.visibleMs ?? Infinity)
      .sort((a, b) => a - b);
    bySecond.push({
      second,
      warmup: inSecond.some((d) => d.warmup),
      deliveries: inSecond.length,
      postP50Ms: round1(percentile(postMs, 50)),
      postP99Ms: round1(percentile(postMs, 99)),
      postMaxMs: round1(postMs.at(-1) ?? null),
      visibleP99Ms: poll ? round1(percentile(visibleMs, 99)) : null,
    });
  }
  return bySecond;
}

function summarize(deliveries, { rate, seconds, pollMs, giveUpMs, sendSeconds }) {
  const visible = deliveries
    .filter((d) => d.visibleMs !== null)
    .map((d) => d.visibleMs)
    .sort((a, b) => a - b);
  const accepted = deliveries.filter((d) => d.status === 202);
  // Deliveries answered 202 but not seen within giveUpMs count as slower than giveUpMs.
  const latencies = [...visible, ...Array(accepted.length - visible.length).fill(Infinity)].sort((a, b) => a - b);
  const posts = deliveries
    .filter((d) => d.postMs !== null)
    .map((d) => d.postMs)
    .sort((a, b) => a - b);
  const ms = (value) => (value === null ? null : value === Infinity ? `>${giveUpMs}` : Math.round(value * 10) / 10);
  return {
    rate,
    seconds,
    pollMs,
    giveUpMs,
    deliveries: deliveries.length,
    accepted: accepted.length,
    statuses: deliveries.reduce(
      (counts, d) => ({ ...counts, [d.status ?? 'error']: (counts[d.status ?? 'error'] ?? 0) + 1 }),
      {},
    ),
    errors: deliveries.filter((d) => d.error).length,
    firstError: deliveries.find((d) => d.error)?.error ?? null,
    achievedRate: Math.round((deliveries.length / sendSeconds) * 10) / 10,
    notVisible: accepted.length - visible.length,
    p50Ms: ms(percentile(latencies, 50)),
    p90Ms: ms(percentile(latencies, 90)),
    p99Ms: ms(percentile(latencies, 99)),
    maxMs: ms(latencies.at(-1) ?? null),
    p99Value: percentile(latencies, 99),
    postP50Ms: ms(percentile(posts, 50)),
    postP99Ms: ms(percentile(posts, 99)),
  };
}

// The SSE clients of bench/fanout.js, a process of its own (its CPU is not the daemon's nor the
// load generator's): N connections to the daemon's change feed, client i following store-i
//   GET $BASE/api/v1/changes?owner_id=store-<i>&type=product&after=$AFTER   (Accept: text/event-stream)
// plus, with ALL=1, one following every store (no owner_id). Connections are opened CONNECT_AT_ONCE
// at a time on one keep-alive agent without a socket limit (each stream holds its socket). Each
// `event:change` frame's change is noted (by its resource id: every delivery of the bench is of a
// product of its own) with the time it arrived, performance.timeOrigin + performance.now() (ms since
// the epoch). A stream that ends or fails is opened again after 1 s with Last-Event-ID.
// A control server on 127.0.0.1:$CONTROL_PORT answers
//   GET /stats     {"connected","open","failed","reconnects","storeUnique","allUnique","misrouted","duplicates",...}
//   GET /arrivals  {"store":{"<id>":ms},"all":{"<id>":ms}, ...the stats}
// Each connection is a socket here and in the daemon: both processes need N + some file descriptors
// (node raises its soft RLIMIT_NOFILE to the hard limit at start; `ulimit -Hn` must allow it).
import { Agent, createServer, request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';

const base = new URL(process.env.BASE);
const clients = Number(process.env.N);
const after = process.env.AFTER ?? '';
const withAll = process.env.ALL === '1';
const CONNECT_AT_ONCE = Number(process.env.CONNECT_AT_ONCE ?? 64);

const agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 16 });
const store = new Map();
const allSeen = new Map();
const stats = {
  clients,
  withAll,
  connected: 0,
  open: 0,
  failed: 0,
  ended: 0,
  reconnects: 0,
  misrouted: 0,
  duplicates: 0,
  frames: 0,
  firstError: null,
  firstMisrouted: null,
  connectedAt: null,
};
const startedAt = performance.now();

function pathOf(owner, lastEventId) {
  const params = new URLSearchParams({ type: 'product' });
  if (owner !== null) params.set('owner_id', owner);
  if (lastEventId === null && after !== '') params.set('after', after);
  return `/api/v1/changes?${params}`;
}

function onChange(owner, json, at) {
  stats.frames++;
  const change = JSON.parse(json);
  if (owner !== null && change.owner_id !== owner) {
    stats.misrouted++;
    stats.firstMisrouted ??= { consumer: owner, owner: change.owner_id, id: change.id };
    return;
  }
  const seen = owner === null ? allSeen : store;
  if (seen.has(change.id)) stats.duplicates++;
  else seen.set(change.id, at);
}

/** Opens client `owner`'s stream; resolves once the answer's head came (or it failed). */
function open(owner, state = { lastEventId: null, first: true, counted: false }) {
  return new Promise((resolve) => {
    const headers = { accept: 'text/event-stream' };
    if (state.lastEventId !== null) headers['last-event-id'] = state.lastEventId;
    const request = httpRequest({
      host: base.hostname,
      port: base.port,
      path: pathOf(owner, state.lastEventId),
      headers,
      agent,
    });
    const again = (why) => {
      stats.firstError ??= why;
      setTimeout(() => {
        stats.reconnects++;
        void open(owner, { ...state, first: false });
      }, 1000);
    };
    request.on('error', (error) => {
      if (state.first) stats.failed++;
      resolve();
      again(`${owner}: ${error.message}`);
    });
    request.on('response', (response) => {
      if (response.statusCode !== 200) {
        if (state.first) stats.failed++;
        response.resume();
        resolve();
        again(`${owner}: answered ${response.statusCode}`);
        return;
      }
      if (!state.counted) stats.connected++;
      state.counted = true;
      stats.open++;
      state.first = false;
      resolve();
      response.setEncoding('utf8');
      let buffered = '';
      response.on('data', (text) => {
        const at = performance.timeOrigin + performance.now();
        buffered += text;
        let end;
        while ((end = buffered.indexOf('\n\n')) >= 0) {
          const frame = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          let event = 'message';
          let data = '';
          for (const line of frame.split('\n')) {
            if (line.startsWith('event:')) event = line.slice(6).trim();
            else if (line.startsWith('data:')) data += (data ? '\n' : '') + line.slice(5).trimStart();
            else if (line.startsWith('id:')) state.lastEventId = line.slice(3).trim();
          }
          if (event === 'change' && data !== '') onChange(owner, data, at);
        }
      });
      response.on('close', () => {
        stats.open--;
        stats.ended++;
        if (!stopping) again(`${owner}: the stream ended`);
      });
    });
    request.end();
  });
}

let stopping = false;

async function connectAll() {
  const owners = Array.from({ length: clients }, (_, i) => `store-${i}`);
  if (withAll) owners.push(null);
  let next = 0;
  const lanes = Array.from({ length: Math.min(CONNECT_AT_ONCE, owners.length) }, async () => {
    while (next < owners.length) await open(owners[next++]);
  });
  await Promise.all(lanes);
  stats.connectedAt = (performance.now() - startedAt) / 1000;
}

function summary() {
  return { ...stats, storeUnique: store.size, allUnique: allSeen.size };
}

const control = createServer((request, response) => {
  const body =
    request.url === '/arrivals'
      ? { ...summary(), store: Object.fromEntries(store), all: Object.fromEntries(allSeen) }
      : summary();
  response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
});
control.listen(Number(process.env.CONTROL_PORT), '127.0.0.1', () => void connectAll());
for (const signal of ['SIGINT', 'SIGTERM'])
  process.on(signal, () => {
    stopping = true;
    process.exit(0);
  });

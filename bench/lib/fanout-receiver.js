// The receiver of bench/fanout.js's http sinks, a process of its own (its CPU is not the daemon's
// nor the load generator's): ONE node:http server on 127.0.0.1:$PORT for every sink, however many.
// Each sink's URL says whom it is for:
//   POST /r/<store>   a sink following one store (owner_ids: [<store>])
//   POST /all/<k>     the k-th sink following every store
// It answers 204 to every batch ({"data":[change…]}, Standard Webhooks), and notes when each change
// (by its resource id: every delivery of the bench is of a product of its own) first reached each
// consumer, on the clock performance.timeOrigin + performance.now() (ms since the epoch, comparable
// across the processes of one machine). A change at /r/<store> of another owner counts as misrouted.
//   GET /stats     {"connections","batches","changes","storeUnique","allUnique":{k:n},"misrouted","duplicates"}
//   GET /arrivals  {"store":{"<id>":ms},"all":{"<k>":{"<id>":ms}}, ...the stats}
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';

const store = new Map();
const all = new Map();
const stats = {
  connections: 0,
  batches: 0,
  changes: 0,
  misrouted: 0,
  duplicates: 0,
  rejected: 0,
  firstMisrouted: null,
};

function received(path, text, at) {
  const slash = path.indexOf('/', 1);
  const kind = path.slice(1, slash);
  const name = decodeURIComponent(path.slice(slash + 1));
  const { data } = JSON.parse(text);
  stats.batches++;
  stats.changes += data.length;
  let seen;
  if (kind === 'r') seen = store;
  else if (kind === 'all') {
    seen = all.get(name);
    if (seen === undefined) all.set(name, (seen = new Map()));
  } else throw new Error(`unknown path ${path}`);
  for (const change of data) {
    if (kind === 'r' && change.owner_id !== name) {
      stats.misrouted++;
      stats.firstMisrouted ??= { consumer: name, owner: change.owner_id, id: change.id };
      continue;
    }
    if (seen.has(change.id)) stats.duplicates++;
    else seen.set(change.id, at);
  }
}

function summary() {
  return {
    ...stats,
    storeUnique: store.size,
    allUnique: Object.fromEntries([...all].map(([k, seen]) => [k, seen.size])),
  };
}

const server = createServer((request, response) => {
  if (request.method === 'GET') {
    const body =
      request.url === '/arrivals'
        ? {
            ...summary(),
            store: Object.fromEntries(store),
            all: Object.fromEntries([...all].map(([k, seen]) => [k, Object.fromEntries(seen)])),
          }
        : summary();
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    return;
  }
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    const at = performance.timeOrigin + performance.now();
    try {
      received(request.url, Buffer.concat(chunks).toString('utf8'), at);
      response.writeHead(204).end();
    } catch (error) {
      stats.rejected++;
      response.writeHead(400).end(String(error));
    }
  });
});
server.on('connection', () => stats.connections++);
// The daemon keeps a connection per sink in flight; let them stay open between batches.
server.keepAliveTimeout = 65_000;
server.headersTimeout = 70_000;

server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write(`listening on ${process.env.PORT}\n`));
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(0));

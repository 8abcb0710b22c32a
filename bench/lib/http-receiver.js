// An HTTP sink's target for the benches, run as a process of its own (so that its CPU is not the
// load generator's): a bare node:http server on 127.0.0.1:$PORT answering 204 to every POST, which
// counts the changes of each batch and, with TRACK_ARRIVALS=1, notes when each event id first arrived
// (performance.timeOrigin + performance.now(): comparable across the processes of one machine).
//   GET /stats     {"batches", "changes", "maxSeq"}
//   GET /arrivals  {"<event id>": <ms since the epoch, fractional>, ...}
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';

const track = process.env.TRACK_ARRIVALS === '1';
const arrivals = new Map();
const stats = { batches: 0, changes: 0, maxSeq: 0 };

function received(text) {
  const at = performance.timeOrigin + performance.now();
  const { data } = JSON.parse(text);
  stats.batches++;
  stats.changes += data.length;
  for (const change of data) {
    if (change.seq > stats.maxSeq) stats.maxSeq = change.seq;
    const eventId = change.resource?.version?.event_id;
    if (track && eventId !== undefined && !arrivals.has(eventId)) arrivals.set(eventId, at);
  }
}

const server = createServer((request, response) => {
  if (request.method === 'GET') {
    const body = request.url === '/arrivals' ? Object.fromEntries(arrivals) : stats;
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    return;
  }
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    try {
      received(Buffer.concat(chunks).toString('utf8'));
      response.writeHead(204).end();
    } catch (error) {
      response.writeHead(400).end(String(error));
    }
  });
});

server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write(`listening on ${process.env.PORT}\n`));
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(0));

// The ingress baseline: a bare Node `http` server that reads a webhook body, JSON.parses it and
// stores it with ONE plain INSERT per request (autocommit: one commit per delivery) into the same
// `event_log` table and columns as the daemon, answering 202 only after the commit.
// No framework, no validation beyond what the columns need, no batching, no request log.
//
//   DATABASE_URL=postgres://... PORT=3100 [HOST=127.0.0.1] [POOL_SIZE=10] [WEBHOOK_KEY=...] node bench/baseline-server.js
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import pg from 'pg';

const SPEC_EVENT_NAMES = new Set([
  'order.created',
  'order.updated',
  'collection.created',
  'collection.updated',
  'collection.destroyed',
  'product.created',
  'product.updated',
  'product.destroyed',
  'trait.created',
  'trait.updated',
  'trait.destroyed',
  'trait_option.created',
  'trait_option.updated',
  'trait_option.destroyed',
]);

const INSERT = `INSERT INTO event_log (event_id, event_type, subject_type, subject_id, owner_id, occurred_at, event_seq,
  source, handled, received_at, key_id, content_type, payload, raw_body, sha256)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
  RETURNING position`;

const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL,
  max: Number(process.env.POOL_SIZE ?? 10),
  application_name: 'menu-sync-bench-baseline',
});
const key = process.env.WEBHOOK_KEY;

function send(response, status, body) {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

async function receive(request, response, body) {
  const receivedAt = new Date();
  let data;
  try {
    data = JSON.parse(body.toString('utf8')).data;
  } catch {
    return send(response, 400, { status: 'invalid' });
  }
  const { attributes, relationships } = data;
  const subject = relationships.subject.data;
  try {
    const result = await pool.query(INSERT, [
      data.id,
      attributes.event_type,
      subject.type,
      String(subject.id),
      relationships.resource_owner?.data ? String(relationships.resource_owner.data.id) : null,
      attributes.created_at,
      attributes.id == null ? null : String(attributes.id),
      'webhook',
      SPEC_EVENT_NAMES.has(attributes.event_type),
      receivedAt,
      'env:1',
      request.headers['content-type'] ?? null,
      body.toString('utf8'),
      null,
      createHash('sha256').update(body).digest(),
    ]);
    send(response, 202, { status: 'accepted', position: Number(result.rows[0].position), event_id: data.id });
  } catch (error) {
    if (error.code === '23505') return send(response, 200, { status: 'duplicate' });
    send(response, 503, { status: 'unavailable', error: error.message });
  }
}

const server = createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/health/ready') {
    pool.query('SELECT 1').then(
      () => send(response, 200, { status: 'ok' }),
      () => send(response, 503, { status: 'error' }),
    );
    return;
  }
  const match = request.method === 'POST' && /^\/webhooks\/([^/?#]+)$/.exec(request.url);
  if (!match || (key !== undefined && match[1] !== key)) {
    request.resume();
    return send(response, 404, { status: 'not found' });
  }
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on(
    'end',
    () =>
      void receive(request, response, Buffer.concat(chunks)).catch((error) => {
        send(response, 500, { status: 'error', error: error.message });
      }),
  );
});
server.keepAliveTimeout = 65_000;

server.listen(Number(process.env.PORT ?? 3100), process.env.HOST ?? '127.0.0.1', () => {
  console.log(`baseline listening on ${JSON.stringify(server.address())}`);
});

function stop() {
  server.close(() => pool.end().finally(() => process.exit(0)));
  server.closeIdleConnections();
  setTimeout(() => process.exit(1), 5000).unref();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

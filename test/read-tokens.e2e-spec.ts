import { randomBytes } from 'node:crypto';
import { sqlQuery } from './support/change-log-factory.js';
import { eventually } from './support/eventually.js';
import {
  api,
  API_TOKEN,
  bytesOf,
  deliver,
  LOOPBACK_NETWORKS,
  RunningDaemon,
  startDaemon,
  WEBHOOK_KEY,
} from './support/http.js';
import { SinkReceiver } from './support/sink-receiver.js';
import { webhookEvent } from './support/webhook-events.js';

type Json = any;

const READ_TOKEN = `test-read-token-${randomBytes(16).toString('hex')}`;
const ADMIN_TOKEN = `test-admin-token-${randomBytes(16).toString('hex')}`;
const READ_METHODS = new Set(['get', 'head']);

/** What every write would change: the rows of the tables the API writes. */
async function writableState(app: RunningDaemon): Promise<unknown> {
  const [sinks, tokens, connections] = await Promise.all([
    sqlQuery(app.database.url, `SELECT * FROM sinks ORDER BY id`),
    sqlQuery(app.database.url, `SELECT * FROM api_tokens ORDER BY id`),
    sqlQuery(
      app.database.url,
      `SELECT (SELECT count(*) FROM connections)::int AS connections, (SELECT count(*) FROM oauth_authorizations)::int AS authorizations`,
    ),
  ]);
  return { sinks, tokens, connections };
}

describe('read: tokens may only read (docs/reference.md §12)', () => {
  let app: RunningDaemon;
  let receiver: SinkReceiver;

  beforeAll(async () => {
    receiver = await new SinkReceiver().start();
    app = await startDaemon({
      API_TOKENS: `${API_TOKEN},read:${READ_TOKEN},admin:${ADMIN_TOKEN}`,
      SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
    });
  });

  afterAll(async () => {
    await receiver?.close();
    await app?.close();
  });

  it('tells each token its role at GET /api/v1/whoami', async () => {
    expect((await api(app.url, '/api/v1/whoami', READ_TOKEN)).json).toEqual({ role: 'read', owner_ids: null });
    expect((await api(app.url, '/api/v1/whoami', API_TOKEN)).json).toEqual({ role: 'admin', owner_ids: null });
    expect((await api(app.url, '/api/v1/whoami', ADMIN_TOKEN)).json).toEqual({ role: 'admin', owner_ids: null });
    expect((await api(app.url, '/api/v1/whoami', 'not-a-token-of-this-daemon')).status).toBe(401);
  });

  it('answers every GET of the API document as for an admin but /raw and the audit log, never with the webhook key, and 403 for everything else, changing nothing', async () => {
    // As the platform sends them: the callback URI, with the key, in the event (and in a rejected one).
    const keyed = webhookEvent();
    (keyed.data as Json).attributes.uri = `http://127.0.0.1/webhooks/${WEBHOOK_KEY}`;
    expect((await deliver(app.url, keyed)).status).toBe(202);
    const rejected = {
      data: { id: 'x', type: 'not_a_webhook_event', attributes: { uri: `/webhooks/${WEBHOOK_KEY}` } },
    };
    expect((await deliver(app.url, rejected)).status).toBe(400);
    const product = await eventually(
      async () => {
        const [first] = (await api(app.url, '/api/v1/products')).json.data;
        expect(first).toBeDefined();
        return first;
      },
      30000,
      100,
    );
    const [event] = (await api(app.url, '/api/v1/events')).json.data;
    const created = await api(app.url, '/api/v1/sinks', API_TOKEN, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'http', url: receiver.url, from: 'now', owner_ids: ['nobody'] }),
    });
    expect(created.status).toBe(201);
    const sinkId = created.json.data.id;
    await eventually(async () => expect((await api(app.url, `/api/v1/sinks/${sinkId}`)).json.data.lag).toBe(0));

    const ids: Record<string, string> = { sinks: sinkId, events: String(event.position) };
    const fill = (path: string) =>
      path.replace(/\{(\w+)\}/g, (_, name: string) => {
        const collection = /\/api\/v1\/(\w+)\//.exec(path)?.[1] ?? '';
        return encodeURIComponent(ids[collection] ?? (name === 'id' ? product.id : '1'));
      });
    const withQuery = (path: string, operation: Json) => {
      const required = (operation.parameters ?? []).filter((p: Json) => p.in === 'query' && p.required);
      const query = required.map(
        (p: Json) => `${p.name}=${encodeURIComponent(p.name === 'owner_id' ? product.owner_id : '1')}`,
      );
      return query.length === 0 ? path : `${path}?${query.join('&')}`;
    };

    const document = (await api(app.url, '/api/docs-json')).json;
    const before = await writableState(app);
    const reads: Array<[string, number, number]> = [];
    const writes: Array<[string, number]> = [];
    const leaks: string[] = [];
    for (const [path, operations] of Object.entries<Json>(document.paths)) {
      const guarded = path.startsWith('/api/') || path === '/auth/connect';
      if (!guarded) continue;
      for (const [method, operation] of Object.entries<Json>(operations)) {
        const url = withQuery(fill(path), operation);
        const init: RequestInit = { method: method.toUpperCase() };
        if (!READ_METHODS.has(method)) {
          init.headers = { 'content-type': 'application/json' };
          init.body = JSON.stringify({ from: 'start', url: `${receiver.url}?changed`, kind: 'http' });
        }
        const asReader = await api(app.url, url, READ_TOKEN, init);
        if (READ_METHODS.has(method) && path !== '/auth/connect') {
          const asAdmin = await api(app.url, url, API_TOKEN, { method: method.toUpperCase() });
          reads.push([`${method} ${path}`, asReader.status, asAdmin.status]);
          leaks.push(...(asReader.text.includes(WEBHOOK_KEY) ? [`${method} ${path}`] : []));
        } else {
          expect(asReader.headers.get('content-type')).toMatch(/^application\/problem\+json/);
          writes.push([`${method} ${path}`, asReader.status]);
        }
      }
    }
    // The document has both kinds, and the ones this test knows.
    expect(reads.map(([route]) => route)).toEqual(
      expect.arrayContaining(['get /api/v1/sinks/{id}', 'get /api/v1/menu']),
    );
    expect(writes.map(([route]) => route)).toEqual(
      expect.arrayContaining([
        'post /api/v1/sinks',
        'patch /api/v1/sinks/{id}',
        'delete /api/v1/sinks/{id}',
        'post /api/v1/sinks/{id}/replay',
        'post /api/v1/sinks/{id}/rotate-secret',
        'post /api/v1/tokens',
        'delete /api/v1/tokens/{id}',
        'get /auth/connect',
      ]),
    );
    // The raw bytes hold the key; tokens and the audit log are an admin's alone, reads included.
    expect(reads.filter(([, reader, admin]) => reader !== admin).sort()).toEqual([
      ['get /api/v1/audit', 403, 200],
      ['get /api/v1/events/{position}/raw', 403, 200],
      ['get /api/v1/tokens', 403, 200],
    ]);
    expect(leaks).toEqual([]);
    // The quarantine and the parsed event were read: each holds the delivery, its key redacted.
    const quarantined = (await api(app.url, '/api/v1/quarantine', READ_TOKEN)).json.data;
    expect(quarantined.map((entry: Json) => JSON.parse(entry.body).data.attributes.uri)).toEqual([
      '/webhooks/[redacted]',
    ]);
    const parsed = (await api(app.url, `/api/v1/events/${event.position}`, READ_TOKEN)).json;
    expect(parsed.payload.data.attributes.uri).toBe('http://127.0.0.1/webhooks/[redacted]');
    // An admin token gets the exact bytes received, key and all.
    const raw = await api(app.url, `/api/v1/events/${event.position}/raw`, ADMIN_TOKEN);
    expect(raw.bytes.equals(bytesOf(keyed))).toBe(true);
    const refused = await api(app.url, `/api/v1/events/${event.position}/raw`, READ_TOKEN);
    expect(refused.status).toBe(403);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(reads.filter(([, reader]) => reader === 200).length).toBeGreaterThan(10);
    expect(writes.filter(([, status]) => status !== 403)).toEqual([]);
    expect(await writableState(app)).toEqual(before);

    // Outside the document's loop: the connect flow by its query token, HEAD, and the feed's SSE.
    expect((await api(app.url, `/auth/connect?api_token=${READ_TOKEN}`, null, { redirect: 'manual' })).status).toBe(
      403,
    );
    expect((await api(app.url, '/api/v1/products', READ_TOKEN, { method: 'HEAD' })).status).toBe(200);
    const controller = new AbortController();
    const stream = await fetch(`${app.url}/api/v1/changes`, {
      headers: { authorization: `Bearer ${READ_TOKEN}`, accept: 'text/event-stream' },
      signal: controller.signal,
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    controller.abort();
    expect(await writableState(app)).toEqual(before);
  });
});

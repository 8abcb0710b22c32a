import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { TEST_SERVER_URL } from './support/database.js';
import {
  Answer,
  api,
  bytesOf,
  deliver,
  postChunked,
  RunningDaemon,
  scrape,
  sha256Hex,
  startDaemon,
  WEBHOOK_KEY,
} from './support/http.js';
import { webhookEvent } from './support/webhook-events.js';

const MAX_BODY = 32768;
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const DELIVERIES = 'menu_sync_webhook_deliveries_total';

type Json = any;

/** A valid event, then broken by `mutate`: each malformed case states only what it breaks. */
function broken(mutate: (event: Json) => void): Json {
  const event = structuredClone(webhookEvent());
  mutate(event);
  return event;
}

/** A valid event whose JSON text is padded with trailing spaces to exactly `size` bytes. */
function paddedTo(size: number, event: Json = webhookEvent()): Buffer {
  const text = JSON.stringify(event);
  return Buffer.from(text + ' '.repeat(size - Buffer.byteLength(text)), 'utf8');
}

function expectProblem(answer: Answer, status: number): void {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(answer.json).toMatchObject({
    type: expect.any(String),
    title: expect.any(String),
    status,
    detail: expect.any(String),
  });
}

describe('POST /webhooks/{key} against the real daemon', () => {
  let app: RunningDaemon;
  let webhookUrl: string;

  beforeAll(async () => {
    app = await startDaemon({ WEBHOOK_MAX_BODY_BYTES: String(MAX_BODY) });
    webhookUrl = `${app.url}/webhooks/${WEBHOOK_KEY}`;
  });

  afterAll(async () => {
    await app?.close();
  });

  const events = (query = '') => api(app.url, `/api/v1/events${query}`);
  const raw = async (position: number) => (await api(app.url, `/api/v1/events/${position}/raw`)).bytes;

  async function head(): Promise<number> {
    let after = 0;
    for (;;) {
      const page = await events(`?after=${after}&limit=1000`);
      if (page.json.data.length === 0) return after;
      after = page.json.data.at(-1).position;
    }
  }

  async function quarantine(): Promise<Json[]> {
    const all: Json[] = [];
    for (let after = 0; ;) {
      const page = await api(app.url, `/api/v1/quarantine?after=${after}&limit=1000`);
      expect(page.status).toBe(200);
      all.push(...page.json.data);
      if (page.json.next_cursor === null) return all;
      after = Number(page.json.next_cursor);
    }
  }

  describe('202 accepted', () => {
    it('answers with the position, and the log keeps the event, its exact bytes and their SHA-256', async () => {
      const event: Json = webhookEvent({ eventType: 'product.created', subjectId: '5101', ownerId: '77' });
      const sent = bytesOf(event);

      const answer = await deliver(app.url, sent);

      expect(answer.status).toBe(202);
      expect(answer.json).toEqual({ status: 'accepted', position: expect.any(Number), event_id: event.data.id });
      const stored = await events(`/${answer.json.position}`);
      expect(stored.status).toBe(200);
      expect(stored.json).toMatchObject({
        position: answer.json.position,
        event_id: event.data.id,
        event_type: 'product.created',
        subject: { type: 'product', id: '5101' },
        owner_id: '77',
        source: 'webhook',
        handled: true,
        payload: event,
        sha256: sha256Hex(sent),
      });
      expect((await raw(answer.json.position)).equals(sent)).toBe(true);
    });

    it.each([
      [
        'pretty-printed with a charset parameter',
        (text: string) => Buffer.from(text),
        'application/json; charset=utf-8',
      ],
      ['prefixed with a UTF-8 BOM', (text: string) => Buffer.concat([BOM, Buffer.from(text)]), 'application/json'],
      [
        'BOM-prefixed with a charset parameter',
        (text: string) => Buffer.concat([BOM, Buffer.from(text)]),
        'application/json; charset=UTF-8',
      ],
      [
        'with non-ASCII text and CRLF line ends',
        (text: string) => Buffer.from(text.replace(/\n/g, '\r\n')),
        'Application/JSON',
      ],
    ])('keeps a body %s byte for byte', async (_name, encode, contentType) => {
      const event: Json = webhookEvent({ attributes: { title: 'Crème brûlée — 🍮' } });
      const sent = encode(JSON.stringify(event, null, 2));

      const answer = await deliver(app.url, sent, { contentType });

      expect(answer.status).toBe(202);
      expect((await raw(answer.json.position)).equals(sent)).toBe(true);
      const stored = await events(`/${answer.json.position}`);
      expect(stored.json.sha256).toBe(sha256Hex(sent));
      expect(stored.json.payload).toEqual(event);
    });
  });

  describe('200 duplicate', () => {
    it('answers the original position for a repeated data.id whatever the body, and keeps the original', async () => {
      const original: Json = webhookEvent();
      const first = await deliver(app.url, original);
      const repeat = webhookEvent({ eventId: original.data.id, eventType: 'product.destroyed' });

      const again = await deliver(app.url, repeat);

      expect(first.status).toBe(202);
      expect(again.status).toBe(200);
      expect(again.json).toEqual({ status: 'duplicate', position: first.json.position });
      expect((await raw(first.json.position)).equals(bytesOf(original))).toBe(true);
    });

    it('gives exactly one 202 among 50 concurrent copies of one event, and one log entry', async () => {
      const subjectId = String(900000 + Math.floor(Math.random() * 99999));
      const event: Json = webhookEvent({ subjectId });

      const answers = await Promise.all(Array.from({ length: 50 }, () => deliver(app.url, event)));

      const statuses = answers.map((answer) => answer.status).sort();
      expect(statuses).toEqual([...Array(49).fill(200), 202]);
      const accepted = answers.find((answer) => answer.status === 202)!;
      expect(new Set(answers.map((answer) => answer.json.position))).toEqual(new Set([accepted.json.position]));
      const logged = await events(`?subject_type=product&subject_id=${subjectId}`);
      expect(logged.json.data.map((entry: Json) => entry.event_id)).toEqual([event.data.id]);
    });
  });

  describe('404 unknown key', () => {
    const unknownKey = `not-a-key-${randomBytes(16).toString('hex')}`;

    it('reveals nothing whatever the body, is counted and stores nothing', async () => {
      const [headBefore, quarantinedBefore, countedBefore] = [
        await head(),
        (await quarantine()).length,
        await scrape(app.url, DELIVERIES, { outcome: 'unknown_key' }),
      ];

      const answer = await deliver(app.url, webhookEvent(), { key: unknownKey });
      const garbage = await deliver(app.url, 'not json', { key: unknownKey, contentType: 'text/plain' });

      expectProblem(answer, 404);
      expect(answer.text).not.toContain(unknownKey);
      expect(garbage.status).toBe(404);
      expect(garbage.json).toEqual(answer.json);
      expect(await scrape(app.url, DELIVERIES, { outcome: 'unknown_key' })).toBe(countedBefore + 2);
      expect(await head()).toBe(headBefore);
      expect(await quarantine()).toHaveLength(quarantinedBefore);
    });

    // docs/reference.md §2: "the same problem body as any unknown route" (its detail names the path, so not byte for byte).
    it("has the problem type and shape of any unknown route's 404", async () => {
      const answer = await deliver(app.url, webhookEvent(), { key: unknownKey });
      const unknownRoute = await api(app.url, '/no-such-route', null, { method: 'POST' });

      expectProblem(unknownRoute, 404);
      expect(Object.keys(answer.json).sort()).toEqual(Object.keys(unknownRoute.json).sort());
      expect(answer.json).toMatchObject({ type: unknownRoute.json.type, title: unknownRoute.json.title, status: 404 });
    });
  });

  describe('415 not JSON', () => {
    it.each([
      ['text/plain', 'text/plain'],
      ['application/xml', 'application/xml'],
      ['no Content-Type', null],
      ['a JSON-looking type', 'application/jsonx'],
      ['form data', 'application/x-www-form-urlencoded'],
    ])('refuses %s and quarantines the body', async (_name, contentType) => {
      const sent = bytesOf(webhookEvent());

      const answer = await deliver(app.url, sent, { contentType });

      expectProblem(answer, 415);
      const kept = (await quarantine()).filter((entry) => entry.sha256 === sha256Hex(sent));
      expect(kept).toEqual([expect.objectContaining({ status: 415, body: sent.toString('utf8') })]);
    });
  });

  describe('413 too large', () => {
    it('refuses a body one byte over the limit announced by Content-Length', async () => {
      const headBefore = await head();

      const answer = await deliver(app.url, paddedTo(MAX_BODY + 1));

      expectProblem(answer, 413);
      expect(await head()).toBe(headBefore);
    });

    it('counts a refused body in menu_sync_webhook_deliveries_total{outcome="too_large"}', async () => {
      const countedBefore = await scrape(app.url, DELIVERIES, { outcome: 'too_large' });

      const answer = await deliver(app.url, paddedTo(MAX_BODY + 1));

      expect(answer.status).toBe(413);
      expect(await scrape(app.url, DELIVERIES, { outcome: 'too_large' })).toBe(countedBefore + 1);
    });

    it('refuses a chunked body (no Content-Length) once more than the limit is read', async () => {
      const headBefore = await head();
      const body = paddedTo(MAX_BODY * 2);
      const chunks = Array.from({ length: 8 }, (_, i) =>
        body.subarray((i * body.length) / 8, ((i + 1) * body.length) / 8),
      );

      const answer = await postChunked(webhookUrl, chunks, { 'content-type': 'application/json' });

      expectProblem(answer, 413);
      expect(await head()).toBe(headBefore);
    });

    it('accepts a chunked body under the limit, so only the size is refused', async () => {
      const body = bytesOf(webhookEvent());
      const third = Math.ceil(body.length / 3);

      const answer = await postChunked(
        webhookUrl,
        [body.subarray(0, third), body.subarray(third, 2 * third), body.subarray(2 * third)],
        { 'content-type': 'application/json' },
      );

      expect(answer.status).toBe(202);
      expect((await raw(answer.json.position)).equals(body)).toBe(true);
    });

    it.each([
      ['with Content-Length', false],
      ['chunked', true],
    ])('accepts a body of exactly the limit (%s), never truncated', async (_name, chunked) => {
      const body = paddedTo(MAX_BODY);
      expect(body).toHaveLength(MAX_BODY);

      const answer = chunked
        ? await postChunked(webhookUrl, [body.subarray(0, 5000), body.subarray(5000, 10000), body.subarray(10000)], {
            'content-type': 'application/json',
          })
        : await deliver(app.url, body);

      expect(answer.status).toBe(202);
      expect((await raw(answer.json.position)).equals(body)).toBe(true);
    });
  });

  describe('400 not a webhook event', () => {
    const valid = () => JSON.stringify(webhookEvent());
    const invalidUtf8 = () => {
      const text = valid();
      const cut = text.indexOf('Product');
      return Buffer.concat([
        Buffer.from(text.slice(0, cut)),
        Buffer.from([0xc3, 0x28, 0xff]),
        Buffer.from(text.slice(cut)),
      ]);
    };
    const cases: Array<[string, () => unknown, string]> = [
      ['not JSON', () => 'hello, world', 'body'],
      ['truncated JSON', () => valid().slice(0, 60), 'body'],
      ['an empty body', () => '', 'body'],
      ['invalid UTF-8 bytes', invalidUtf8, 'body'],
      // '' names the document root (as a JSON Pointer does); 'body' is for bytes that are not JSON at all.
      ['a JSON array', () => '[]', ''],
      ['JSON null', () => 'null', ''],
      ['a JSON string', () => '"data"', ''],
      ['no data', () => ({ included: [] }), 'data'],
      ['data not an object', () => ({ data: 'webhook_event' }), 'data'],
      ['data an array', () => ({ data: [] }), 'data'],
      ['no data.id', () => broken((e) => delete e.data.id), 'data.id'],
      ['an empty data.id', () => broken((e) => (e.data.id = '')), 'data.id'],
      ['a numeric data.id', () => broken((e) => (e.data.id = 42)), 'data.id'],
      ['a 10,000-character data.id', () => broken((e) => (e.data.id = 'x'.repeat(10000))), 'data.id'],
      ['a data.id holding \\u0000', () => broken((e) => (e.data.id = `evt\u0000${randomUUID()}`)), 'data.id'],
      ['a data.id holding a lone surrogate', () => broken((e) => (e.data.id = `evt\ud800${randomUUID()}`)), 'data.id'],
      ['data.type not webhook_event', () => broken((e) => (e.data.type = 'event')), 'data.type'],
      ['no data.attributes', () => broken((e) => delete e.data.attributes), 'data.attributes'],
      ['no event_type', () => broken((e) => delete e.data.attributes.event_type), 'data.attributes.event_type'],
      ['a numeric event_type', () => broken((e) => (e.data.attributes.event_type = 7)), 'data.attributes.event_type'],
      [
        'an event_type holding \\u0000',
        () => broken((e) => (e.data.attributes.event_type = 'product.\u0000')),
        'data.attributes.event_type',
      ],
      ['no created_at', () => broken((e) => delete e.data.attributes.created_at), 'data.attributes.created_at'],
      [
        'created_at "yesterday"',
        () => broken((e) => (e.data.attributes.created_at = 'yesterday')),
        'data.attributes.created_at',
      ],
      [
        'created_at in month 13',
        () => broken((e) => (e.data.attributes.created_at = '2024-13-01T00:00:00Z')),
        'data.attributes.created_at',
      ],
      [
        'created_at without a zone',
        () => broken((e) => (e.data.attributes.created_at = '2024-05-01T10:00:00')),
        'data.attributes.created_at',
      ],
      [
        'created_at as epoch milliseconds',
        () => broken((e) => (e.data.attributes.created_at = 1714557600000)),
        'data.attributes.created_at',
      ],
      ['attributes.id a fraction', () => broken((e) => (e.data.attributes.id = 1.5)), 'data.attributes.id'],
      ['attributes.id a word', () => broken((e) => (e.data.attributes.id = 'seven')), 'data.attributes.id'],
      ['no relationships', () => broken((e) => delete e.data.relationships), 'data.relationships'],
      ['no subject', () => broken((e) => delete e.data.relationships.subject), 'data.relationships.subject'],
      [
        'subject.data null',
        () => broken((e) => (e.data.relationships.subject.data = null)),
        'data.relationships.subject.data',
      ],
      [
        'no subject type',
        () => broken((e) => delete e.data.relationships.subject.data.type),
        'data.relationships.subject.data.type',
      ],
      [
        'no subject id',
        () => broken((e) => delete e.data.relationships.subject.data.id),
        'data.relationships.subject.data.id',
      ],
      [
        'a subject id that is an object',
        () => broken((e) => (e.data.relationships.subject.data.id = { id: 1 })),
        'data.relationships.subject.data.id',
      ],
      [
        'a subject type not matching the event type',
        () => webhookEvent({ eventType: 'product.created', subjectType: 'collection' }),
        'data.relationships.subject.data.type',
      ],
      ['no included for an updated event', () => broken((e) => delete e.included), 'included'],
      ['included not holding the subject', () => broken((e) => (e.included[0].id = '999999')), 'included'],
      ['included holding the id under another type', () => broken((e) => (e.included[0].type = 'trait')), 'included'],
      [
        'included an object for a destroyed event',
        () =>
          broken((e) => {
            e.data.attributes.event_type = 'product.destroyed';
            e.included = {};
          }),
        'included',
      ],
      [
        'a resource_owner.data.id that is an object',
        () => broken((e) => (e.data.relationships.resource_owner.data.id = { id: '42' })),
        'data.relationships.resource_owner.data.id',
      ],
    ];

    it.each(cases)('refuses %s, naming the field, and quarantines the body', async (_name, make, field) => {
      const sent = bytesOf(make());

      const answer = await deliver(app.url, sent);

      expectProblem(answer, 400);
      expect(answer.json.field).toBe(field);
      const kept = (await quarantine()).filter((entry) => entry.sha256 === sha256Hex(sent)).at(-1);
      expect(kept).toMatchObject({ status: 400, field, reason: answer.json.detail, sha256: sha256Hex(sent) });
      const keptBytes =
        kept.body_encoding === 'base64' ? Buffer.from(kept.body, 'base64') : Buffer.from(kept.body, 'utf8');
      expect(keptBytes.equals(sent)).toBe(true);
    });

    it('tells at least 25 malformed bodies apart: each refusal names its own field and reason', async () => {
      const refusals = [];
      for (const [, make, field] of cases) {
        const answer = await deliver(app.url, bytesOf(make()));
        refusals.push({ status: answer.status, field: answer.json?.field, detail: answer.json?.detail });
        expect(refusals.at(-1)).toMatchObject({ status: 400, field });
      }
      // A parser answering one generic reason for every fault would give a single detail.
      expect(new Set(refusals.map((refusal) => `${refusal.field}: ${refusal.detail}`)).size).toBeGreaterThanOrEqual(25);
    });
  });

  describe('valid JSON that PostgreSQL finds awkward: 202 or 400, never 5XX', () => {
    // Built as text: JSON.stringify of so deep a value would overflow the test's own stack.
    const nested = (depth: number) =>
      Buffer.from(
        JSON.stringify(webhookEvent({ attributes: { deep: 'DEEP' } })).replace(
          '"DEEP"',
          '['.repeat(depth) + ']'.repeat(depth),
        ),
      );
    const longId = 'i'.repeat(255);
    const cases: Array<[string, () => Buffer]> = [
      [
        'an escaped \\u0000 inside included attributes',
        () => bytesOf(webhookEvent({ attributes: { title: 'nul\u0000here' } })),
      ],
      ['an escaped \\u0000 as an attribute name', () => bytesOf(webhookEvent({ attributes: { '\u0000': 'nul key' } }))],
      [
        'a lone high surrogate inside an attribute',
        () => bytesOf(webhookEvent({ attributes: { title: 'half \ud800 pair' } })),
      ],
      ['a lone low surrogate inside an attribute', () => bytesOf(webhookEvent({ attributes: { title: '\udfff' } }))],
      ['a BOM before the JSON', () => Buffer.concat([BOM, bytesOf(webhookEvent())])],
      ['a 255-character data.id', () => bytesOf(webhookEvent({ eventId: `${longId.slice(36)}${randomUUID()}` }))],
      [
        'a 255-character subject id',
        () => bytesOf(webhookEvent({ subjectId: `${Date.now()}${longId}`.slice(0, 255) })),
      ],
      ['a 256-character data.id', () => bytesOf(webhookEvent({ eventId: `${'i'.repeat(220)}${randomUUID()}` }))],
      ['an astral-plane data.id', () => bytesOf(webhookEvent({ eventId: `🍕-${randomUUID()}` }))],
      [
        'a number too large for a double',
        () => Buffer.from(JSON.stringify(webhookEvent()).replace('"available":true', '"available":1e400')),
      ],
      [
        'an attributes.id beyond 64 bits',
        () => bytesOf(broken((e) => (e.data.attributes.id = '123456789012345678901234567890'))),
      ],
      ['a created_at with nanoseconds', () => bytesOf(webhookEvent({ createdAt: '2024-05-01T10:00:00.123456789Z' }))],
      ['a created_at in year 1', () => bytesOf(webhookEvent({ createdAt: '0001-01-01T00:00:00Z' }))],
      ['a created_at in year 9999', () => bytesOf(webhookEvent({ createdAt: '9999-12-31T23:59:59.999Z' }))],
      ...[1000, 6000, 15000].map((depth): [string, () => Buffer] => [
        `attributes nested ${depth} arrays deep`,
        () => nested(depth),
      ]),
    ];

    it.each(cases)('%s', async (_name, make) => {
      const sent = make();

      const answer = await deliver(app.url, sent);

      expect([202, 400]).toContain(answer.status);
      if (answer.status === 400) {
        expectProblem(answer, 400);
        expect(answer.json.field).toEqual(expect.any(String));
        return;
      }
      expect((await raw(answer.json.position)).equals(sent)).toBe(true);
      const stored = await events(`/${answer.json.position}`);
      expect(stored.status).toBe(200);
      expect(stored.json.sha256).toBe(sha256Hex(sent));
    });
  });

  describe('an event type outside the spec', () => {
    it('is accepted, logged as unhandled and counted', async () => {
      const countedBefore = await scrape(app.url, DELIVERIES, { outcome: 'unhandled' });
      const event: Json = webhookEvent({ eventType: 'store.updated', subjectId: '31' });

      const answer = await deliver(app.url, event);

      expect(answer.status).toBe(202);
      const stored = await events(`/${answer.json.position}`);
      expect(stored.json).toMatchObject({
        event_type: 'store.updated',
        subject: { type: 'store', id: '31' },
        handled: false,
      });
      expect(await scrape(app.url, DELIVERIES, { outcome: 'unhandled' })).toBe(countedBefore + 1);
    });
  });

  describe('503 when the append cannot be confirmed', () => {
    let admin: pg.Client;

    beforeAll(async () => {
      admin = new pg.Client({ connectionString: TEST_SERVER_URL });
      await admin.connect();
    });

    afterAll(async () => {
      await admin.query(`ALTER DATABASE ${app.database.name} ALLOW_CONNECTIONS true`);
      await admin.end();
    });

    it('answers 503 with Retry-After while the database is unreachable, then stores the retry exactly once', async () => {
      const event: Json = webhookEvent();
      const name = app.database.name;
      const countedBefore = await scrape(app.url, DELIVERIES, { outcome: 'unavailable' });
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
        [name],
      );

      let unavailable: Answer;
      try {
        unavailable = await deliver(app.url, event);
      } finally {
        await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
      }

      expectProblem(unavailable, 503);
      expect(Number(unavailable.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await scrape(app.url, DELIVERIES, { outcome: 'unavailable' })).toBeGreaterThan(countedBefore);
      // As a sender honouring Retry-After would: the pool needs a moment to replace its dead connections.
      let retried = await deliver(app.url, event);
      for (const deadline = Date.now() + 15000; retried.status === 503 && Date.now() < deadline;) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        retried = await deliver(app.url, event);
      }
      expect([200, 202]).toContain(retried.status);
      const logged = await events(
        `?subject_type=product&subject_id=${event.data.relationships.subject.data.id}&limit=1000`,
      );
      expect(logged.json.data.filter((entry: Json) => entry.event_id === event.data.id)).toHaveLength(1);
    });
  });

  describe('the webhook key in the logs (LOG_LEVEL=debug: every request is logged)', () => {
    it('is never written, though every delivery above logged its route /webhooks/:key', async () => {
      const routeLines = () => (app.process.logs.match(/"route":"\/webhooks\/:key"/g) ?? []).length;
      const before = routeLines();

      const answers = [
        await deliver(app.url, webhookEvent()),
        await deliver(app.url, '{"data":'),
        await deliver(app.url, 'plain', { contentType: 'text/plain' }),
        await api(app.url, `/webhooks/${WEBHOOK_KEY}/extra?key=${WEBHOOK_KEY}`, null, { method: 'POST' }),
      ];

      expect(answers.map((answer) => answer.status)).toEqual([202, 400, 415, 404]);
      // The lines of these requests, found by their request ids: each logged its route and status, none the key.
      const lines = () =>
        answers.map((answer) => {
          const id = answer.headers.get('x-request-id')!;
          return app.process.logs
            .split('\n')
            .find((line) => line.includes(`"reqId":"${id}"`) && line.includes('request completed'));
        });
      // pino writes asynchronously: wait for the access-log lines of the requests just made.
      await waitFor(
        async () => routeLines() >= before + 3 && lines().every(Boolean),
        10000,
        () => app.process.logs,
      );
      expect(
        lines()
          .map((line) => JSON.parse(line!))
          .map((entry) => ({ route: entry.route, status: entry.status })),
      ).toEqual([
        { route: '/webhooks/:key', status: 202 },
        { route: '/webhooks/:key', status: 400 },
        { route: '/webhooks/:key', status: 415 },
        { route: 'unmatched', status: 404 },
      ]);
      expect(app.process.logs).not.toContain(WEBHOOK_KEY);
    });
  });
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs: number, describe: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms:\n${describe()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

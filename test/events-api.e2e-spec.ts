import {
  Answer,
  api,
  API_TOKEN,
  bytesOf,
  deliver,
  RunningDaemon,
  sha256Hex,
  startDaemon,
  WEBHOOK_KEY,
} from './support/http.js';
import { webhookEvent } from './support/webhook-events.js';

type Json = any;

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

describe('/api/v1/events against the real daemon (docs/reference.md §5)', () => {
  let app: RunningDaemon;
  /** What was delivered, in delivery order, with the position each got. */
  const delivered: Array<{ event: Json; bytes: Buffer; position: number }> = [];

  const events = (query = '', token: string | null = API_TOKEN) => api(app.url, `/api/v1/events${query}`, token);

  beforeAll(async () => {
    app = await startDaemon();
    // A small log of mixed types and subjects; sent one at a time so positions follow this order.
    const plan: Json[] = [
      ...[1, 2, 3, 4, 5].map((n) =>
        webhookEvent({ eventType: 'product.updated', subjectId: String(100 + n), ownerId: '42' }),
      ),
      ...[1, 2, 3].map((n) =>
        webhookEvent({ eventType: 'collection.created', subjectId: String(200 + n), ownerId: '43' }),
      ),
      ...[1, 2].map(() => webhookEvent({ eventType: 'product.created', subjectId: '7', ownerId: '42' })),
      ...[1, 2].map((n) => webhookEvent({ eventType: 'trait.destroyed', subjectId: String(300 + n), ownerId: '42' })),
    ];
    for (const event of plan) {
      const bytes = bytesOf(event);
      const answer = await deliver(app.url, bytes);
      if (answer.status !== 202) throw new Error(`seeding failed: ${answer.status} ${answer.text}`);
      delivered.push({ event, bytes, position: answer.json.position });
    }
  });

  afterAll(async () => {
    await app?.close();
  });

  describe('authentication (API_TOKENS set)', () => {
    it.each([
      ['no Authorization header', null],
      ['a wrong bearer token', 'not-the-api-token-at-all'],
      ['the webhook key instead of the token', WEBHOOK_KEY],
    ])('answers 401 problem+json for %s', async (_name, token) => {
      const answers = [
        await events('', token),
        await events(`/${delivered[0].position}`, token),
        await events(`/${delivered[0].position}/raw`, token),
        await api(app.url, '/api/v1/quarantine', token),
      ];

      for (const answer of answers) expectProblem(answer, 401);
      expect(answers[1].text).not.toContain(delivered[0].event.data.id);
    });

    it('answers 401 for another scheme carrying the right token', async () => {
      const answer = await api(app.url, '/api/v1/events', null, { headers: { authorization: `Basic ${API_TOKEN}` } });

      expectProblem(answer, 401);
    });

    it('answers 200 with the right bearer token, whatever the case of the scheme', async () => {
      const answer = await api(app.url, '/api/v1/events', null, { headers: { authorization: `bearer ${API_TOKEN}` } });

      expect(answer.status).toBe(200);
      expect(answer.json.data.length).toBeGreaterThan(0);
    });

    it.each(['/health/live', '/health/ready', '/metrics', '/api/docs-json', '/api/docs'])(
      '%s needs no token',
      async (path) => {
        const answer = await api(app.url, path, null);

        expect(answer.status).toBe(200);
      },
    );

    it('describes the events endpoints in the OpenAPI document', async () => {
      const answer = await api(app.url, '/api/docs-json', null);

      expect(Object.keys(answer.json.paths)).toEqual(
        expect.arrayContaining(['/api/v1/events', '/api/v1/events/{position}']),
      );
    });
  });

  describe('GET /api/v1/events', () => {
    it("lists every entry in position order with the contract's fields", async () => {
      const answer = await events('?limit=1000');

      expect(answer.status).toBe(200);
      expect(answer.json.next_cursor).toBeNull();
      expect(answer.json.data.map((entry: Json) => entry.event_id)).toEqual(
        delivered.map(({ event }) => event.data.id),
      );
      const positions = answer.json.data.map((entry: Json) => entry.position);
      expect(positions).toEqual([...positions].sort((a, b) => a - b));
      expect(positions).toEqual(delivered.map(({ position }) => position));
      const { event } = delivered[5];
      expect(answer.json.data[5]).toEqual(
        expect.objectContaining({
          position: delivered[5].position,
          event_id: event.data.id,
          event_type: 'collection.created',
          subject: { type: 'collection', id: '201' },
          owner_id: '43',
          occurred_at: new Date(event.data.attributes.created_at).toISOString(),
          received_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/),
          source: 'webhook',
        }),
      );
    });

    it('pages through all entries with next_cursor, each exactly once, in order', async () => {
      const seen: Json[] = [];
      const sizes: number[] = [];
      let after = '0';
      for (let page = 0; page < 10; page++) {
        const answer = await events(`?after=${after}&limit=5`);
        expect(answer.status).toBe(200);
        seen.push(...answer.json.data);
        sizes.push(answer.json.data.length);
        if (answer.json.next_cursor === null) break;
        expect(answer.json.next_cursor).toEqual(expect.any(String));
        after = answer.json.next_cursor;
      }

      expect(sizes).toEqual([5, 5, 2]);
      expect(seen.map((entry) => entry.position)).toEqual(delivered.map(({ position }) => position));
    });

    it('starts after the given position', async () => {
      const answer = await events(`?after=${delivered[9].position}`);

      expect(answer.json.data.map((entry: Json) => entry.position)).toEqual([
        delivered[10].position,
        delivered[11].position,
      ]);
    });

    it.each([
      ['event_type=collection.created', (e: Json) => e.data.attributes.event_type === 'collection.created'],
      ['subject_type=product', (e: Json) => e.data.relationships.subject.data.type === 'product'],
      ['subject_type=product&subject_id=7', (e: Json) => e.data.relationships.subject.data.id === '7'],
      [
        'event_type=trait.destroyed&subject_type=trait&subject_id=302',
        (e: Json) => e.data.relationships.subject.data.id === '302',
      ],
      ['subject_id=999999', () => false],
      ['event_type=store.updated', () => false],
    ])('filters by %s', async (query, expected) => {
      const answer = await events(`?${query}`);

      expect(answer.status).toBe(200);
      expect(answer.json.data.map((entry: Json) => entry.event_id)).toEqual(
        delivered.filter(({ event }) => expected(event)).map(({ event }) => event.data.id),
      );
    });

    it('pages a filtered list too', async () => {
      const first = await events('?subject_type=product&limit=4');
      const second = await events(`?subject_type=product&limit=4&after=${first.json.next_cursor}`);

      const products = delivered.filter(({ event }) => event.data.relationships.subject.data.type === 'product');
      expect(first.json.data).toHaveLength(4);
      expect([...first.json.data, ...second.json.data].map((entry: Json) => entry.position)).toEqual(
        products.map(({ position }) => position),
      );
      expect(second.json.next_cursor).toBeNull();
    });

    it.each([
      ['after=-1', 'after'],
      ['after=abc', 'after'],
      ['after=1.5', 'after'],
      ['limit=0', 'limit'],
      ['limit=1001', 'limit'],
      ['limit=x', 'limit'],
      ['limit=-5', 'limit'],
    ])('answers 400 problem+json naming the parameter for %s', async (query, field) => {
      const answer = await events(`?${query}`);

      expectProblem(answer, 400);
      expect(answer.json.field).toBe(field);
      expect(answer.json.detail).toContain(field);
    });

    it('accepts the bounds limit=1 and limit=1000', async () => {
      const one = await events('?limit=1');
      const thousand = await events('?limit=1000');

      expect(one.json.data).toHaveLength(1);
      expect(one.json.next_cursor).toBe(String(delivered[0].position));
      expect(thousand.json.data).toHaveLength(delivered.length);
    });
  });

  describe('GET /api/v1/events/{position}', () => {
    it('answers the entry with its parsed payload and the SHA-256 of the bytes received', async () => {
      const { event, bytes, position } = delivered[3];

      const answer = await events(`/${position}`);

      expect(answer.status).toBe(200);
      expect(answer.json).toMatchObject({
        position,
        event_id: event.data.id,
        event_type: 'product.updated',
        subject: { type: 'product', id: '104' },
        owner_id: '42',
        source: 'webhook',
        payload: event,
        sha256: sha256Hex(bytes),
      });
    });

    it('answers the exact bytes at /raw', async () => {
      const { bytes, position } = delivered[10];

      const answer = await events(`/${position}/raw`);

      expect(answer.status).toBe(200);
      expect(answer.bytes.equals(bytes)).toBe(true);
    });

    it.each([
      ['/999999', 404, undefined],
      ['/999999/raw', 404, undefined],
      ['/abc', 400, 'position'],
      ['/0', 400, 'position'],
      ['/-3', 400, 'position'],
      ['/1e3', 400, 'position'],
      ['/0x10', 400, 'position'],
      ['/abc/raw', 400, 'position'],
      ['/99999999999999999999', 400, 'position'],
    ])('answers %s with a %i problem', async (path, status, field) => {
      const answer = await events(path);

      expectProblem(answer, status);
      expect(answer.json.field).toBe(field);
    });
  });
});

import { eventually } from './support/eventually.js';
import { api, API_TOKEN, deliver, RunningDaemon, startDaemon } from './support/http.js';
import { webhookEvent } from './support/webhook-events.js';

type Json = any;

const ALPHA = 'owner-alpha';
const BRAVO = 'owner-bravo';

/** Two owners' products, each titled after its owner, so an answer that holds the other's data says so. */
const products = (owner: string, first: number) =>
  [0, 1, 2].map((n) =>
    webhookEvent({ ownerId: owner, subjectId: String(first + n), attributes: { title: `${owner} product ${n}` } }),
  );

describe('tokens scoped to owners (docs/reference.md §12, Owner scope)', () => {
  let app: RunningDaemon;
  let alpha: string;
  let both: string;

  const as = (token: string, path: string) => api(app.url, path, token);

  beforeAll(async () => {
    app = await startDaemon();
    for (const event of [...products(ALPHA, 3000), ...products(BRAVO, 4000)])
      expect((await deliver(app.url, event)).status).toBe(202);
    await eventually(async () => expect((await api(app.url, '/api/v1/products')).json.data.length).toBe(6), 30_000);
    const make = async (body: Json) => {
      const created = await api(app.url, '/api/v1/tokens', API_TOKEN, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(created.status).toBe(201);
      return created.json.token as string;
    };
    alpha = await make({ name: 'alpha storefront', role: 'read', owner_ids: [ALPHA] });
    both = await make({ name: 'two stores', role: 'read', owner_ids: [ALPHA, BRAVO] });
  });

  afterAll(async () => {
    await app?.close();
  });

  it('answers its one owner by default, and 403 naming owner_id for another', async () => {
    expect((await as(alpha, '/api/v1/whoami')).json).toEqual({ role: 'read', owner_ids: [ALPHA] });
    const listed = await as(alpha, '/api/v1/products');
    expect(listed.json.data.map((p: Json) => [p.id, p.owner_id])).toEqual([
      ['3000', ALPHA],
      ['3001', ALPHA],
      ['3002', ALPHA],
    ]);
    const other = await as(alpha, `/api/v1/products?owner_id=${BRAVO}`);
    expect([other.status, other.json.field]).toEqual([403, 'owner_id']);
    expect((await as(alpha, `/api/v1/menu?owner_id=${ALPHA}`)).json.products.map((p: Json) => p.id)).toEqual([
      '3000',
      '3001',
      '3002',
    ]);
    expect((await as(alpha, `/api/v1/menu?owner_id=${BRAVO}`)).status).toBe(403);
    const changes = (await as(alpha, '/api/v1/changes?limit=100')).json.data;
    expect(changes.map((change: Json) => change.owner_id)).toEqual([ALPHA, ALPHA, ALPHA]);
  });

  it('makes a token of several owners name one', async () => {
    const unnamed = await as(both, '/api/v1/products');
    expect([unnamed.status, unnamed.json.field]).toEqual([403, 'owner_id']);
    expect((await as(both, `/api/v1/products?owner_id=${BRAVO}`)).json.data.map((p: Json) => p.id)).toEqual([
      '4000',
      '4001',
      '4002',
    ]);
  });

  it('answers no GET route of the API document with another owner’s data, and refuses what it cannot scope', async () => {
    const document = (await api(app.url, '/api/docs-json')).json;
    const statuses: Record<string, number> = {};
    for (const [path, operations] of Object.entries<Json>(document.paths)) {
      if (!path.startsWith('/api/') || operations.get === undefined) continue;
      const url = path.replace(/\{id\}/g, '4000').replace(/\{position\}/g, '4');
      const answer = await as(alpha, url);
      expect({ path, bravo: answer.text.includes(BRAVO) }).toEqual({ path, bravo: false });
      statuses[path] = answer.status;
    }
    // The scoped reads answer; everything else (events, quarantine, sinks, tokens, audit, reads by id) is refused.
    expect(statuses['/api/v1/products']).toBe(200);
    expect(statuses['/api/v1/whoami']).toBe(200);
    for (const path of [
      '/api/v1/events',
      '/api/v1/quarantine',
      '/api/v1/sinks',
      '/api/v1/tokens',
      '/api/v1/audit',
      '/api/v1/connections',
      '/api/v1/products/{id}',
    ])
      expect({ path, status: statuses[path] }).toEqual({ path, status: 403 });
  });
});

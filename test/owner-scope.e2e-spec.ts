import fc from 'fast-check';
import { ChangeStream } from './support/changes.js';
import { eventually } from './support/eventually.js';
import { Answer, api, API_TOKEN, deliver, RunningDaemon, startDaemon } from './support/http.js';
import {
  collection,
  destroyedEvent,
  menuEvent,
  order,
  orderEvent,
  orderProduct,
  product,
  store,
  trait,
  traitOption,
  user,
} from './support/menu-events.js';

type Json = any;

/**
 * docs/reference.md §12, Owner scope: a token scoped to owners answers only their data on every
 * read, tells nothing of another owner's resources (404, as never seen), refuses an `owner_id`
 * outside its scope naming it, and everything that is not its owners' data (403).
 */

const ALPHA = 'owner-alpha';
const BRAVO = 'owner-bravo';
const CHARLIE = 'owner-charlie';
const OWNERS = [ALPHA, BRAVO, CHARLIE];

/** Each owner's ids: one of every kind, in its own thousand. */
const idsOf = (base: number) => ({
  collections: String(base + 100),
  products: String(base),
  traits: String(base + 200),
  trait_options: String(base + 300),
  stores: String(base + 400),
  orders: String(base + 500),
  order_products: String(base + 600),
});
const IDS: Record<string, ReturnType<typeof idsOf>> = {
  [ALPHA]: idsOf(3000),
  [BRAVO]: idsOf(4000),
  [CHARLIE]: idsOf(5000),
};

/** An owner's menu, store and order, every resource titled after its owner, and a product destroyed. */
function seedEvents(owner: string): Json[] {
  const ids = IDS[owner];
  const meta = (minute: number) => ({ at: new Date(Date.UTC(2024, 4, 1, 10, minute)), ownerId: owner });
  const gone = String(Number(ids.products) + 9);
  return [
    menuEvent('created', traitOption(ids.trait_options, { title: `${owner} option`, traitId: ids.traits }), meta(1)),
    menuEvent('created', trait(ids.traits, { title: `${owner} trait`, optionIds: [ids.trait_options] }), meta(2)),
    menuEvent('created', product(ids.products, { title: `${owner} product`, traitIds: [ids.traits] }), meta(3)),
    menuEvent('created', product(gone, { title: `${owner} gone` }), meta(3)),
    destroyedEvent('product', gone, meta(4)),
    menuEvent('created', collection(ids.collections, { title: `${owner} menu`, productIds: [ids.products] }), meta(5)),
    menuEvent('updated', store(ids.stores, { title: `${owner} store` }), meta(6)),
    orderEvent(
      'created',
      {
        user: user(String(Number(ids.orders) + 1)),
        order: order(ids.orders, {
          orderProductIds: [ids.order_products],
          storeId: ids.stores,
          userId: String(Number(ids.orders) + 1),
          note: `${owner} order`,
        }),
        orderProducts: [orderProduct(ids.order_products, { productId: ids.products })],
        store: store(ids.stores, { title: `${owner} store` }),
      },
      meta(7),
    ),
  ];
}

/** A delivery the ingress refuses (no webhook_event), naming `owner` as its resource owner. */
const refusedNaming = (owner: string) => ({
  data: {
    id: `refused-${owner}`,
    type: 'not_a_webhook_event',
    relationships: { resource_owner: { data: { id: owner, type: 'user' } } },
  },
});

const READS = new Set(['get', 'head']);
/** Routes whose `{id}` or `{position}` names one owner's entry: the owner's answers 200, another's 404. */
const BY_ID = new Set([...Object.keys(IDS[ALPHA]).map((name) => `/api/v1/${name}/{id}`), '/api/v1/events/{position}']);
/** The reads a scoped token gets, filtered to its owners. */
const FILTERED = new Set([
  '/api/v1/whoami',
  '/api/v1/menu',
  '/api/v1/changes',
  '/api/v1/events',
  '/api/v1/quarantine',
  '/api/v1/owners',
  ...Object.keys(IDS[ALPHA]).map((name) => `/api/v1/${name}`),
]);

describe('tokens scoped to owners (docs/reference.md §12, Owner scope)', () => {
  let app: RunningDaemon;
  /** Scoped to ALPHA; to ALPHA and CHARLIE; a read token of every owner. */
  let alpha: string;
  let pair: string;
  let reader: string;
  let document: Json;
  /** The log position of one event of each owner, and how many changes each owner's events made. */
  const positions: Record<string, number> = {};
  const changeCounts: Record<string, number> = {};

  const as = (token: string, path: string, init?: RequestInit) => api(app.url, path, token, init);
  const made: string[] = [];

  beforeAll(async () => {
    app = await startDaemon();
    for (const owner of OWNERS) {
      for (const event of seedEvents(owner)) expect((await deliver(app.url, event)).status).toBe(202);
      expect((await deliver(app.url, refusedNaming(owner))).status).toBe(400);
    }
    expect((await deliver(app.url, Buffer.from('not json at all'))).status).toBe(400);
    // Every projection has read every owner's last events (the menu and the orders are read apart).
    const owners = async (path: string) => (await api(app.url, path)).json.data.map((r: Json) => r.owner_id).sort();
    await eventually(async () => {
      expect(await owners('/api/v1/orders')).toEqual(OWNERS);
      expect(await owners('/api/v1/stores')).toEqual(OWNERS);
      expect(await owners('/api/v1/collections')).toEqual(OWNERS);
      expect(await owners('/api/v1/products?include_deleted=true')).toEqual(OWNERS.flatMap((o) => [o, o]));
      const deleted = (await api(app.url, '/api/v1/products?include_deleted=true')).json.data;
      expect(deleted.filter((p: Json) => p.deleted)).toHaveLength(3);
    }, 30_000);
    for (const entry of (await api(app.url, '/api/v1/events?limit=1000')).json.data)
      positions[entry.owner_id] ??= entry.position;
    for (const change of (await api(app.url, '/api/v1/changes?limit=1000')).json.data)
      changeCounts[change.owner_id] = (changeCounts[change.owner_id] ?? 0) + 1;
    // Five menu resources each, the destroyed product's create kept or not as the projector's pages fell.
    for (const owner of OWNERS) expect([5, 6]).toContain(changeCounts[owner]);
    const make = async (body: Json) => {
      const created = await as(API_TOKEN, '/api/v1/tokens', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(created.status).toBe(201);
      made.push(created.json.id);
      return created.json.token as string;
    };
    alpha = await make({ name: 'alpha storefront', role: 'read', owner_ids: [ALPHA] });
    pair = await make({ name: 'two stores', role: 'read', owner_ids: [ALPHA, CHARLIE] });
    reader = await make({ name: 'every store', role: 'read' });
    document = (await api(app.url, '/api/docs-json')).json;
  });

  afterAll(async () => {
    await app?.close();
  });

  /** `path` with its `{id}` or `{position}` naming `owner`'s entry of that collection. */
  const fill = (path: string, owner: string) =>
    path
      .replace(/^\/api\/v1\/(\w+)\/\{id\}/, (whole, name: string) =>
        name in IDS[owner] ? `/api/v1/${name}/${(IDS[owner] as Json)[name]}` : whole.replace('{id}', '1'),
      )
      .replace('{position}', String(positions[owner]));

  const routes = (methods: (method: string) => boolean) =>
    Object.entries<Json>(document.paths).flatMap(([path, operations]) =>
      path.startsWith('/api/') || path === '/auth/connect'
        ? Object.keys(operations)
            .filter(methods)
            .map((method) => ({ path, method, operation: operations[method] }))
        : [],
    );

  it('answers every GET route of the API document with its owner’s data only: another’s by id 404, the rest 403', async () => {
    const seen: Record<string, [number, number]> = {};
    const leaks: string[] = [];
    for (const { path } of routes((method) => method === 'get')) {
      const own = await as(alpha, fill(path, ALPHA));
      const other = await as(alpha, fill(path, BRAVO));
      seen[path] = [own.status, other.status];
      for (const answer of [own, other])
        if (answer.text.includes(BRAVO) || answer.text.includes(CHARLIE)) leaks.push(path);
    }
    expect(leaks).toEqual([]);
    const expected = Object.fromEntries(
      Object.keys(seen).map((path) => [
        path,
        BY_ID.has(path) ? [200, 404] : FILTERED.has(path) ? [200, 200] : [403, 403],
      ]),
    );
    expect(seen).toEqual(expected);
    // The document has the routes this test knows, and the 403s include what §12 names.
    expect(Object.keys(seen)).toEqual(expect.arrayContaining([...BY_ID, ...FILTERED]));
    for (const path of [
      '/api/v1/sinks',
      '/api/v1/tokens',
      '/api/v1/audit',
      '/api/v1/connections',
      '/api/v1/events/{position}/raw',
    ])
      expect({ path, status: seen[path] }).toEqual({ path, status: [403, 403] });
  });

  it('lists, the menu, the log and the quarantine hold exactly its owner’s entries', async () => {
    const ids = IDS[ALPHA];
    for (const name of Object.keys(ids))
      expect({ name, ids: (await as(alpha, `/api/v1/${name}`)).json.data.map((r: Json) => r.id) }).toEqual({
        name,
        ids: [(ids as Json)[name]],
      });
    const deleted = await as(alpha, '/api/v1/products?include_deleted=true');
    expect(deleted.json.data.map((r: Json) => [r.id, r.deleted])).toEqual([
      ['3000', false],
      ['3009', true],
    ]);
    const menu = (await as(alpha, '/api/v1/menu')).json;
    expect(menu.collections.map((c: Json) => c.id)).toEqual([ids.collections]);
    expect(menu.products.map((p: Json) => p.id)).toEqual([ids.products]);
    const events = (await as(alpha, '/api/v1/events?limit=1000')).json.data;
    expect(events.map((e: Json) => e.owner_id)).toEqual(Array(8).fill(ALPHA));
    const quarantine = (await as(alpha, '/api/v1/quarantine')).json.data;
    expect(quarantine.map((q: Json) => q.owner_id)).toEqual([ALPHA]);
    expect((await as(API_TOKEN, '/api/v1/quarantine')).json.data.map((q: Json) => q.owner_id)).toEqual([
      ALPHA,
      BRAVO,
      CHARLIE,
      null,
    ]);
    expect((await as(alpha, '/api/v1/owners')).json.data.map((o: Json) => [o.owner_id, o.events])).toEqual([
      [ALPHA, 8],
    ]);
    const expanded = (await as(alpha, `/api/v1/products/${ids.products}?expand=traits`)).json;
    expect(expanded.traits.map((t: Json) => [t.id, t.trait_options.map((o: Json) => o.id)])).toEqual([
      [ids.traits, [ids.trait_options]],
    ]);
    expect((await as(alpha, `/api/v1/products/${IDS[BRAVO].products}?expand=traits`)).status).toBe(404);
    expect((await as(alpha, `/api/v1/orders/${IDS[BRAVO].orders}?expand=order_products`)).status).toBe(404);
    expect((await as(alpha, `/api/v1/products/${IDS[BRAVO].products}?as_of=2030-01-01T00:00:00Z`)).status).toBe(404);
    expect((await as(alpha, `/api/v1/orders/${IDS[BRAVO].orders}?as_of=2030-01-01T00:00:00Z`)).status).toBe(404);
    const missing = await as(alpha, `/api/v1/products/${IDS[BRAVO].products}`);
    const never = await as(alpha, '/api/v1/products/999999');
    expect(missing.json.detail.replace(IDS[BRAVO].products, 'N')).toBe(never.json.detail.replace('999999', 'N'));
  });

  it('refuses an owner_id outside its scope on every route that takes one, naming it', async () => {
    const taking = routes((method) => method === 'get').filter(({ operation }) =>
      (operation.parameters ?? []).some((p: Json) => p.in === 'query' && p.name === 'owner_id'),
    );
    expect(taking.map(({ path }) => path).sort()).toEqual(
      [
        '/api/v1/menu',
        '/api/v1/changes',
        '/api/v1/sinks',
        ...Object.keys(IDS[ALPHA]).map((name) => `/api/v1/${name}`),
      ].sort(),
    );
    for (const { path } of taking) {
      for (const asked of [BRAVO, `${ALPHA}&owner_id=${BRAVO}`]) {
        const refused = await as(alpha, `${path}?owner_id=${asked}`);
        expect({ path, asked, status: refused.status, field: refused.json.field }).toEqual({
          path,
          asked,
          status: 403,
          field: 'owner_id',
        });
      }
      const own = (await as(alpha, `${path}?owner_id=${ALPHA}`)).status;
      expect({ path, own }).toEqual({ path, own: FILTERED.has(path) ? 200 : 403 });
    }
  });

  it('a token of several owners reads all of them, and only them, unless it names one', async () => {
    const owners = async (path: string) =>
      [...new Set((await as(pair, path)).json.data.map((r: Json) => r.owner_id))].sort();
    expect(await owners('/api/v1/products')).toEqual([ALPHA, CHARLIE]);
    expect(await owners('/api/v1/orders')).toEqual([ALPHA, CHARLIE]);
    expect(await owners('/api/v1/changes?limit=1000')).toEqual([ALPHA, CHARLIE]);
    expect(await owners('/api/v1/events?limit=1000')).toEqual([ALPHA, CHARLIE]);
    expect(await owners(`/api/v1/products?owner_id=${CHARLIE}`)).toEqual([CHARLIE]);
    const menu = await as(pair, '/api/v1/menu');
    expect([menu.status, menu.json.field]).toEqual([400, 'owner_id']);
    expect((await as(pair, `/api/v1/menu?owner_id=${CHARLIE}`)).json.products.map((p: Json) => p.id)).toEqual([
      IDS[CHARLIE].products,
    ]);
  });

  it('streams only its owners’ changes over SSE, whatever it follows, and refuses another owner’s stream', async () => {
    const stream = new ChangeStream(app.url, { token: alpha });
    const wide = new ChangeStream(app.url, { token: pair });
    try {
      const refused = await as(alpha, `/api/v1/changes?owner_id=${BRAVO}`, {
        headers: { accept: 'text/event-stream' },
      });
      expect([refused.status, refused.json.field]).toEqual([403, 'owner_id']);
      await eventually(async () => expect(stream.changes).toHaveLength(changeCounts[ALPHA]));
      const meta = (owner: string) => ({ at: new Date(), ownerId: owner });
      for (const owner of [BRAVO, ALPHA, CHARLIE])
        expect((await deliver(app.url, menuEvent('updated', product(IDS[owner].products), meta(owner)))).status).toBe(
          202,
        );
      await eventually(async () => expect(wide.changes).toHaveLength(changeCounts[ALPHA] + changeCounts[CHARLIE] + 2));
      await eventually(async () => expect(stream.changes).toHaveLength(changeCounts[ALPHA] + 1));
      expect([...new Set(stream.changes.map((c: Json) => c.owner_id))]).toEqual([ALPHA]);
      expect([...new Set(wide.changes.map((c: Json) => c.owner_id))].sort()).toEqual([ALPHA, CHARLIE]);
      expect(stream.changes.at(-1).resource.id).toBe(IDS[ALPHA].products);
    } finally {
      await Promise.all([stream.close(), wide.close()]);
    }
  });

  it('gives 403 on every write route of the API document, changing nothing', async () => {
    const writes = routes((method) => !READS.has(method));
    expect(writes.map(({ method, path }) => `${method} ${path}`)).toEqual(
      expect.arrayContaining([
        'post /api/v1/sinks',
        'patch /api/v1/sinks/{id}',
        'delete /api/v1/sinks/{id}',
        'post /api/v1/sinks/{id}/replay',
        'post /api/v1/tokens',
        'delete /api/v1/tokens/{id}',
      ]),
    );
    for (const { path, method } of writes) {
      const answer = await as(alpha, fill(path, ALPHA), {
        method: method.toUpperCase(),
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'http', url: 'http://127.0.0.1:9/', from: 'start', name: 'x', role: 'admin' }),
      });
      expect({ path, method, status: answer.status }).toEqual({ path, method, status: 403 });
    }
    const connect = await as(alpha, '/auth/connect');
    expect(connect.status).toBe(403);
  });

  it('never answers a resource of an owner outside the scope (property, random tokens × requests)', async () => {
    const tokens = () => [
      { token: alpha, scope: [ALPHA] },
      { token: pair, scope: [ALPHA, CHARLIE] },
      { token: reader, scope: OWNERS },
      { token: API_TOKEN, scope: OWNERS },
    ];
    const owner = fc.constantFrom(...OWNERS, 'owner-nobody');
    const collectionName = fc.constantFrom(...Object.keys(IDS[ALPHA]));
    const request = fc.oneof(
      fc.record({ kind: fc.constant('list'), name: collectionName, owner: fc.option(owner), deleted: fc.boolean() }),
      fc.record({ kind: fc.constant('item'), name: collectionName, owner }),
      fc.record({ kind: fc.constant('menu'), owner: fc.option(owner) }),
      fc.record({ kind: fc.constant('changes'), owner: fc.option(owner) }),
      fc.record({ kind: fc.constant('event'), position: fc.integer({ min: 1, max: 30 }) }),
      fc.constantFrom({ kind: 'events' }, { kind: 'quarantine' }, { kind: 'owners' }),
    );
    const url = (r: Json): string => {
      const ownerQuery = r.owner === null || r.owner === undefined ? '' : `owner_id=${r.owner}`;
      switch (r.kind) {
        case 'list':
          return `/api/v1/${r.name}?limit=1000&include_deleted=${r.deleted}${ownerQuery && `&${ownerQuery}`}`;
        case 'item':
          return `/api/v1/${r.name}/${(IDS[r.owner] as Json)?.[r.name] ?? '1'}`;
        case 'menu':
          return `/api/v1/menu?${ownerQuery}`;
        case 'changes':
          return `/api/v1/changes?limit=1000&${ownerQuery}`;
        case 'event':
          return `/api/v1/events/${r.position}`;
        default:
          return `/api/v1/${r.kind}?limit=1000`;
      }
    };
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...tokens()), request, async ({ token, scope }, r) => {
        const path = url(r);
        const answer: Answer = await as(token, path);
        const outside = OWNERS.filter((o) => !scope.includes(o));
        expect({ path, leaked: outside.filter((o) => answer.text.includes(o)) }).toEqual({ path, leaked: [] });
        expect([200, 400, 403, 404, 410]).toContain(answer.status);
        // A list the token may read is the whole list's entries of its owners, no more and no fewer.
        if (r.kind === 'list' && answer.status === 200) {
          const whole = (await as(API_TOKEN, path)).json.data;
          expect(answer.json.data).toEqual(whole.filter((e: Json) => scope.includes(e.owner_id)));
        }
        if (r.kind === 'item' && scope.includes(r.owner)) expect(answer.status).toBe(200);
        if (r.kind === 'item' && !scope.includes(r.owner)) expect(answer.status).toBe(404);
      }),
      { numRuns: 200 },
    );
  });

  it('records none of these reads in the audit log: only the tokens the suite made', async () => {
    const entries = (await as(API_TOKEN, '/api/v1/audit')).json.data;
    expect(entries.map((e: Json) => [e.action, e.target])).toEqual(made.map((id) => ['token.created', id]).reverse());
  });
});

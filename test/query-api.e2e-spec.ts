import { Answer, api, API_TOKEN, deliver, RunningDaemon, startDaemon } from './support/http.js';
import {
  at,
  collection,
  destroyedEvent,
  Json,
  menuEvent,
  order,
  orderEvent,
  orderProduct,
  orderProductTraitOption,
  product,
  Resource,
  store,
  trait,
  traitOption,
  user,
} from './support/menu-events.js';
import { eventually } from './support/eventually.js';

/**
 * The query API (docs/reference.md §4 and §5) through HTTP only: deliveries go in through
 * POST /webhooks/{key}, state comes out through /api/v1 with the bearer token. One real daemon
 * (a child process, see test/support/http.ts) for the whole file; each block uses its own owners
 * and id range, since resources are keyed by (type, id) alone.
 */

const MENU_LISTS = [
  { name: 'collections', type: 'collection', make: (id: string) => collection(id, { productIds: ['1', '2'] }) },
  { name: 'products', type: 'product', make: (id: string) => product(id, { traitIds: ['5'] }) },
  { name: 'traits', type: 'trait', make: (id: string) => trait(id, { optionIds: ['6'] }) },
  { name: 'trait_options', type: 'trait_option', make: (id: string) => traitOption(id, { traitId: '5' }) },
] as const;
const ALL_LISTS = ['collections', 'products', 'traits', 'trait_options', 'orders', 'order_products', 'stores'];

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

const ids = (resources: Json[]) => resources.map((resource) => resource.id);

/** A menu's content: without changes_cursor, which live reads carry and as_of reads do not (docs/reference.md §11). */
const menuContent = ({ changes_cursor: _cursor, ...content }: Json) => content;

describe('query API /api/v1 against the real daemon (docs/reference.md §4, §5)', () => {
  let app: RunningDaemon;
  let highestPosition = 0;

  const get = (path: string, headers: Record<string, string> = {}) => api(app.url, path, API_TOKEN, { headers });

  /** Delivers one event (an object, or raw JSON text) and insists on the expected ingress answer. */
  async function post(event: Json | string, expected = 202): Promise<Answer> {
    const answer = await deliver(app.url, event, { contentType: 'application/json' });
    if (answer.status !== expected)
      throw new Error(`delivery answered ${answer.status}, expected ${expected}: ${answer.text}`);
    highestPosition = Math.max(highestPosition, answer.json.position);
    return answer;
  }

  async function postAll(events: Json[]): Promise<Answer[]> {
    const answers: Answer[] = [];
    for (const event of events) answers.push(await post(event));
    return answers;
  }

  /** Every projection has read the whole log (its lag is 0): nothing delivered so far is still pending. */
  async function caughtUp(): Promise<void> {
    await eventually(async () => {
      const status = await get('/api/v1/projections');
      expect(status.status).toBe(200);
      expect(status.json.data.map((p: Json) => p.lag)).toEqual(status.json.data.map(() => 0));
    });
  }

  async function getOk(path: string, status = 200): Promise<Json> {
    const answer = await get(path);
    expect({ path, status: answer.status }).toEqual({ path, status });
    return answer.json;
  }

  /** Follows next_cursor from the first page to the end. */
  async function listAll(path: string, limit: number): Promise<{ items: Json[]; pages: number }> {
    const items: Json[] = [];
    let pages = 0;
    let cursor: string | null = null;
    do {
      const separator = path.includes('?') ? '&' : '?';
      const page = await get(
        `${path}${separator}limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
      );
      expect(page.status).toBe(200);
      expect(page.json.data.length).toBeLessThanOrEqual(limit);
      items.push(...page.json.data);
      cursor = page.json.next_cursor;
      pages++;
      if (pages > 50) throw new Error('paging does not end');
    } while (cursor !== null);
    return { items, pages };
  }

  /** The API resource the contract says a delivered create/update yields. */
  function expected(resource: Resource, event: Json, position: number, ownerId: string, deleted = false): Json {
    return {
      type: resource.type,
      id: resource.id,
      owner_id: ownerId,
      attributes: resource.attributes,
      relationships: resource.relationships,
      version: { event_id: event.data.id, occurred_at: event.data.attributes.created_at, position },
      deleted,
    };
  }

  beforeAll(async () => {
    app = await startDaemon();
  });

  afterAll(async () => {
    // QUERY_API_DUMP_LOGS=1 prints the daemon's error lines (e.g. the cause of a 500).
    if (process.env.QUERY_API_DUMP_LOGS)
      console.log(
        app?.process.logs
          .split('\n')
          .filter((line) => /error|ERROR|"level":(50|40)/.test(line))
          .join('\n'),
      );
    await app?.close();
  });

  it('answers 401 problem+json without the bearer token', async () => {
    expectProblem(await api(app.url, '/api/v1/products', null), 401);
    expectProblem(await api(app.url, '/api/v1/menu?owner_id=1', 'wrong-token'), 401);
  });

  describe('lists: resource shape, numeric id order, paging, owner_id', () => {
    // Delivered in this order; the API must list them as 2, 10, 100, 10^21 (numeric, not text order).
    const listIds = ['100', '2', '1000000000000000000000', '10'];
    const sent = new Map<string, Array<{ resource: Resource; event: Json; position: number }>>();

    beforeAll(async () => {
      for (const { name, make } of MENU_LISTS) {
        const entries: Array<{ resource: Resource; event: Json; position: number }> = [];
        for (const [index, id] of listIds.entries()) {
          const resource = make(id);
          const event = menuEvent('created', resource, { at: at(index), ownerId: `lists-${name}` });
          entries.push({ resource, event, position: (await post(event)).json.position });
        }
        sent.set(name, entries);
        await post(menuEvent('created', make('3'), { at: at(0), ownerId: `lists-${name}-other` }));
      }
      await caughtUp();
    });

    it.each(MENU_LISTS.map((list) => list.name))(
      'GET /api/v1/%s lists resources verbatim, by id numerically',
      async (name) => {
        const page = await getOk(`/api/v1/${name}?owner_id=lists-${name}`);
        expect(page.next_cursor).toBeNull();
        expect(ids(page.data)).toEqual(['2', '10', '100', '1000000000000000000000']);
        for (const { resource, event, position } of sent.get(name)!) {
          const listed = page.data.find((item: Json) => item.id === resource.id);
          expect(listed).toEqual(expected(resource, event, position, `lists-${name}`));
          // The item endpoint answers the same resource.
          expect(await getOk(`/api/v1/${name}/${resource.id}`)).toEqual(listed);
        }
      },
    );

    it.each(MENU_LISTS.map((list) => list.name))(
      'GET /api/v1/%s pages through everything with limit and next_cursor',
      async (name) => {
        const first = await getOk(`/api/v1/${name}?owner_id=lists-${name}&limit=3`);
        expect(ids(first.data)).toEqual(['2', '10', '100']);
        expect(typeof first.next_cursor).toBe('string');
        const second = await getOk(
          `/api/v1/${name}?owner_id=lists-${name}&limit=3&cursor=${encodeURIComponent(first.next_cursor)}`,
        );
        expect(ids(second.data)).toEqual(['1000000000000000000000']);
        expect(second.next_cursor).toBeNull();

        const { items, pages } = await listAll(`/api/v1/${name}?owner_id=lists-${name}`, 1);
        expect(ids(items)).toEqual(['2', '10', '100', '1000000000000000000000']);
        expect(pages).toBeGreaterThanOrEqual(4);
        // Without an owner filter, every owner's resources, still in id order, without repeats.
        const everything = await listAll(`/api/v1/${name}`, 2);
        const all = ids(everything.items);
        expect(all).toEqual(expect.arrayContaining(['2', '3', '10', '100', '1000000000000000000000']));
        expect(new Set(all).size).toBe(all.length);
        const numeric = all.filter((id: string) => /^\d+$/.test(id)).map((id: string) => BigInt(id));
        expect(numeric).toEqual([...numeric].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      },
    );

    it.each(MENU_LISTS.map((list) => list.name))('GET /api/v1/%s?owner_id= leaves out other owners', async (name) => {
      const other = await getOk(`/api/v1/${name}?owner_id=lists-${name}-other`);
      expect(ids(other.data)).toEqual(['3']);
      expect(other.data[0].owner_id).toBe(`lists-${name}-other`);
      expect((await getOk(`/api/v1/${name}?owner_id=nobody-at-all`)).data).toEqual([]);
    });
  });

  describe('lists: default and maximum limit', () => {
    beforeAll(async () => {
      const events = Array.from({ length: 101 }, (_, i) =>
        menuEvent('created', collection(String(10001 + i)), { at: at(1), ownerId: 'many' }),
      );
      for (let i = 0; i < events.length; i += 25)
        await Promise.all(events.slice(i, i + 25).map((event) => post(event)));
      await caughtUp();
    });

    it('answers 100 by default with a next_cursor, and up to 1000 with limit=1000', async () => {
      const first = await getOk('/api/v1/collections?owner_id=many');
      expect(first.data).toHaveLength(100);
      expect(first.data[0].id).toBe('10001');
      expect(typeof first.next_cursor).toBe('string');
      const rest = await getOk(`/api/v1/collections?owner_id=many&cursor=${encodeURIComponent(first.next_cursor)}`);
      expect(ids(rest.data)).toEqual(['10101']);
      expect(rest.next_cursor).toBeNull();
      const whole = await getOk('/api/v1/collections?owner_id=many&limit=1000');
      expect(whole.data).toHaveLength(101);
      expect(whole.next_cursor).toBeNull();
    });
  });

  describe('lists: updated_since and include_deleted', () => {
    beforeAll(async () => {
      await postAll([
        menuEvent('created', product('11001'), { at: at(10), ownerId: 'since' }),
        menuEvent('created', product('11002'), { at: at(30), ownerId: 'since' }),
        menuEvent('created', trait('12001'), { at: at(10), ownerId: 'deleted' }),
        menuEvent('created', trait('12002'), { at: at(10), ownerId: 'deleted' }),
        menuEvent('created', trait('12003'), { at: at(10), ownerId: 'deleted' }),
        destroyedEvent('trait', '12002', { at: at(20), ownerId: 'deleted' }),
        // Only its destroyed event is ever known.
        destroyedEvent('trait', '12004', { at: at(20), ownerId: 'deleted' }),
      ]);
      await caughtUp();
    });

    it('updated_since keeps resources whose newest event occurred since then', async () => {
      expect(ids((await getOk(`/api/v1/products?owner_id=since&updated_since=${at(20)}`)).data)).toEqual(['11002']);
      expect(ids((await getOk(`/api/v1/products?owner_id=since&updated_since=${at(0)}`)).data)).toEqual([
        '11001',
        '11002',
      ]);
      expect((await getOk(`/api/v1/products?owner_id=since&updated_since=${at(40)}`)).data).toEqual([]);
    });

    it('include_deleted defaults to false and hides destroyed resources; true shows them with "deleted": true', async () => {
      expect(ids((await getOk('/api/v1/traits?owner_id=deleted')).data)).toEqual(['12001', '12003']);
      expect(ids((await getOk('/api/v1/traits?owner_id=deleted&include_deleted=false')).data)).toEqual([
        '12001',
        '12003',
      ]);
      const all = (await getOk('/api/v1/traits?owner_id=deleted&include_deleted=true')).data;
      expect(all.map((t: Json) => [t.id, t.deleted])).toEqual([
        ['12001', false],
        ['12002', true],
        ['12003', false],
        ['12004', true],
      ]);
    });
  });

  describe('malformed parameters → 400 problem+json naming the field', () => {
    const cases: Array<[string, string]> = [
      ['limit', 'limit=0'],
      ['limit', 'limit=1001'],
      ['limit', 'limit=ten'],
      ['cursor', 'cursor=%25%25%25'],
      ['cursor', 'cursor=zzzz'],
      ['as_of', 'as_of=yesterday'],
      ['updated_since', 'updated_since=x'],
      ['include_deleted', 'include_deleted=maybe'],
    ];

    it.each(cases)('%s: ?%s on every list', async (field, query) => {
      for (const name of ALL_LISTS) {
        const answer = await get(`/api/v1/${name}?${query}`);
        expectProblem(answer, 400);
        expect(`${answer.json.field ?? ''} ${answer.json.detail}`).toContain(field);
      }
    });

    it('as_of and expand on item reads and on /menu; /menu without owner_id', async () => {
      for (const path of [
        '/api/v1/products/1?as_of=yesterday',
        '/api/v1/collections/1?as_of=yesterday',
        '/api/v1/traits/1?as_of=yesterday',
        '/api/v1/trait_options/1?as_of=yesterday',
        '/api/v1/orders/1?as_of=yesterday',
        '/api/v1/order_products/1?as_of=yesterday',
        '/api/v1/stores/1?as_of=yesterday',
        '/api/v1/menu?owner_id=1&as_of=yesterday',
      ]) {
        const answer = await get(path);
        expectProblem(answer, 400);
        expect(`${answer.json.field ?? ''} ${answer.json.detail}`).toContain('as_of');
      }
      for (const path of ['/api/v1/products/1?expand=options', '/api/v1/orders/1?expand=everything']) {
        const answer = await get(path);
        expectProblem(answer, 400);
        expect(`${answer.json.field ?? ''} ${answer.json.detail}`).toContain('expand');
      }
      const noOwner = await get('/api/v1/menu');
      expectProblem(noOwner, 400);
      expect(`${noOwner.json.field ?? ''} ${noOwner.json.detail}`).toContain('owner_id');
    });
  });

  describe('GET /api/v1/{type}/{id}: 200, 404, 410', () => {
    const created = new Map<string, { resource: Resource; event: Json; position: number }>();
    const destroyed = new Map<string, { event: Json; position: number }>();
    const destroyedOnly = new Map<string, { event: Json; position: number }>();

    beforeAll(async () => {
      for (const [index, { name, type, make }] of MENU_LISTS.entries()) {
        const id = String(13001 + index);
        const resource = make(id);
        const event = menuEvent('created', resource, { at: at(1), ownerId: 'items' });
        created.set(name, { resource, event, position: (await post(event)).json.position });
        const destroy = destroyedEvent(type, id, { at: at(2), ownerId: 'items' });
        destroyed.set(name, { event: destroy, position: (await post(destroy)).json.position });
        const only = destroyedEvent(type, String(13101 + index), { at: at(3), ownerId: 'items' });
        destroyedOnly.set(name, { event: only, position: (await post(only)).json.position });
      }
      await caughtUp();
    });

    it('integer ids in a delivery name the same resource as their decimal text', async () => {
      const numeric = menuEvent('created', product('13201', { traitIds: ['13202'] }), { at: at(1), ownerId: 'items' });
      numeric.data.relationships.subject.data.id = 13201;
      numeric.included[0].id = 13201;
      numeric.included[0].relationships.traits.data[0].id = 13202;
      await postAll([numeric, menuEvent('created', trait('13202'), { at: at(1), ownerId: 'items' })]);
      await caughtUp();
      const answer = await getOk('/api/v1/products/13201?expand=traits');
      expect(answer.id).toBe('13201');
      expect(answer.relationships).toEqual(numeric.included[0].relationships);
      expect(ids(answer.traits)).toEqual(['13202']);
    });

    it.each(ALL_LISTS)('GET /api/v1/%s/{id} never seen → 404 problem', async (name) => {
      expectProblem(await get(`/api/v1/${name}/987654321`), 404);
      expectProblem(await get(`/api/v1/${name}/not-a-known-id`), 404);
    });

    it.each(MENU_LISTS.map((list) => list.name))(
      'GET /api/v1/%s/{id} after *.destroyed → 410 with the resource, "deleted": true',
      async (name) => {
        const { resource } = created.get(name)!;
        const { event, position } = destroyed.get(name)!;
        const answer = await get(`/api/v1/${name}/${resource.id}`);
        expect(answer.status).toBe(410);
        expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
        // The tombstone keeps what was deleted (evolve.ts: attributes of the newest create/update).
        expect(answer.json).toEqual(expected(resource, event, position, 'items', true));
      },
    );

    it.each(MENU_LISTS.map((list) => list.name))(
      'GET /api/v1/%s/{id} known only from its destroyed event → 410, "deleted": true',
      async (name) => {
        const { event, position } = destroyedOnly.get(name)!;
        const answer = await get(`/api/v1/${name}/${event.data.relationships.subject.data.id}`);
        expect(answer.status).toBe(410);
        expect(answer.json).toMatchObject({
          type: event.data.relationships.subject.data.type,
          id: event.data.relationships.subject.data.id,
          owner_id: 'items',
          version: { event_id: event.data.id, occurred_at: event.data.attributes.created_at, position },
          deleted: true,
        });
      },
    );
  });

  describe('order independence through HTTP (docs/reference.md §4)', () => {
    const events: Record<string, Json> = {};
    let newerPosition: number;

    beforeAll(async () => {
      const base = `ooo-${Date.now()}`;
      const p = (title: string) => product('14001', { title });
      events.created = menuEvent('created', p('v1'), { at: at(1), ownerId: 'ooo' });
      events.newer = menuEvent('updated', p('v3'), { at: at(3), ownerId: 'ooo' });
      events.older = menuEvent('updated', p('v2'), { at: at(2), ownerId: 'ooo' });
      newerPosition = (await postAll([events.created, events.newer, events.older]))[1].json.position;
      // Same instant: attributes.id decides (compared as an integer: 10 > 9).
      const q = (title: string) => product('14002', { title });
      events.seqHigh = menuEvent('updated', q('seq 10'), { at: at(5), ownerId: 'ooo', seq: 10 });
      events.seqLow = menuEvent('updated', q('seq 9'), { at: at(5), ownerId: 'ooo', seq: 9 });
      await postAll([events.seqHigh, events.seqLow]);
      // Same instant and attributes.id: data.id bytewise ("a" 0x61 > "B" 0x42, unlike most collations).
      const r = (title: string) => product('14003', { title });
      events.idHigh = menuEvent('updated', r('id a'), { at: at(5), ownerId: 'ooo', seq: 7, eventId: `${base}-a` });
      events.idLow = menuEvent('updated', r('id B'), { at: at(5), ownerId: 'ooo', seq: 7, eventId: `${base}-B` });
      await postAll([events.idHigh, events.idLow]);
      // A destroy, then an older update arriving later.
      const s = (title: string) => product('14004', { title });
      events.destroyed = destroyedEvent('product', '14004', { at: at(7), ownerId: 'ooo' });
      events.lateUpdate = menuEvent('updated', s('late'), { at: at(6), ownerId: 'ooo' });
      await postAll([
        menuEvent('created', s('first'), { at: at(1), ownerId: 'ooo' }),
        events.destroyed,
        events.lateUpdate,
      ]);
      // Created again after a destroy, delivered first: live, with the newest state.
      events.recreated = menuEvent('created', product('14005', { title: 'again' }), { at: at(3), ownerId: 'ooo' });
      await postAll([
        events.recreated,
        destroyedEvent('product', '14005', { at: at(2), ownerId: 'ooo' }),
        menuEvent('created', product('14005', { title: 'first' }), { at: at(1), ownerId: 'ooo' }),
      ]);
      await caughtUp();
    });

    it('an update with an older created_at delivered after a newer one changes nothing', async () => {
      const answer = await getOk('/api/v1/products/14001');
      expect(answer.attributes.title).toBe('v3');
      expect(answer.version.event_id).toBe(events.newer.data.id);
    });

    it('at the same instant, the higher attributes.id wins whatever the arrival order', async () => {
      const answer = await getOk('/api/v1/products/14002');
      expect(answer.attributes.title).toBe('seq 10');
      expect(answer.version.event_id).toBe(events.seqHigh.data.id);
    });

    it('at the same instant and attributes.id, the bytewise greater data.id wins', async () => {
      const answer = await getOk('/api/v1/products/14003');
      expect(answer.attributes.title).toBe('id a');
      expect(answer.version.event_id).toBe(events.idHigh.data.id);
    });

    it('an older update arriving after a destroy does not bring the resource back', async () => {
      const answer = await get('/api/v1/products/14004');
      expect(answer.status).toBe(410);
      expect(answer.json.deleted).toBe(true);
      expect(answer.json.version.event_id).toBe(events.destroyed.data.id);
      expect(ids((await getOk('/api/v1/products?owner_id=ooo')).data)).toEqual(['14001', '14002', '14003', '14005']);
    });

    it('a create newer than a destroy brings the resource back, whatever the arrival order', async () => {
      const answer = await getOk('/api/v1/products/14005');
      expect(answer).toMatchObject({
        deleted: false,
        attributes: { title: 'again' },
        version: { event_id: events.recreated.data.id },
      });
    });

    it('a duplicate data.id → 200 duplicate with the original position, whatever its body; state unchanged', async () => {
      const before = await getOk('/api/v1/products/14001');
      const position = newerPosition;
      const repeat = structuredClone(events.newer);
      repeat.data.attributes.created_at = at(100);
      repeat.included[0].attributes.title = 'a duplicate that must not apply';
      const answer = await post(repeat, 200);
      expect(answer.json).toEqual({ status: 'duplicate', position });
      expect((await post(events.newer, 200)).json).toEqual({ status: 'duplicate', position });
      await caughtUp();
      expect(await getOk('/api/v1/products/14001')).toEqual(before);
    });
  });

  describe('GET /api/v1/products/{id}?expand=traits', () => {
    beforeAll(async () => {
      const meta = (minutes: number) => ({ at: at(minutes), ownerId: 'expand' });
      await postAll([
        // Traits in relationship order 15103, 15101, an unknown 15199, a deleted 15102.
        menuEvent('created', product('15001', { traitIds: ['15103', '15101', '15199', '15102'] }), meta(1)),
        menuEvent('created', trait('15101', { optionIds: ['15206', '15207'] }), meta(1)),
        menuEvent('created', trait('15102', { optionIds: ['15208'] }), meta(1)),
        menuEvent('created', trait('15103', { optionIds: ['15205', '15204', '15298'] }), meta(1)),
        destroyedEvent('trait', '15102', meta(2)),
        menuEvent('created', traitOption('15204', { traitId: '15103' }), meta(1)),
        menuEvent('created', traitOption('15205', { traitId: '15103' }), meta(1)),
        menuEvent('created', traitOption('15206', { traitId: '15101' }), meta(1)),
        destroyedEvent('trait_option', '15206', meta(2)),
        menuEvent('created', traitOption('15207', { traitId: '15101' }), meta(1)),
        menuEvent('created', traitOption('15208', { traitId: '15102' }), meta(1)),
      ]);
      await caughtUp();
    });

    it('adds traits with their trait_options in relationship order, leaving out unknown and deleted ones', async () => {
      const answer = await getOk('/api/v1/products/15001?expand=traits');
      expect(answer.traits.map((t: Json) => [t.id, ids(t.trait_options)])).toEqual([
        ['15103', ['15205', '15204']],
        ['15101', ['15207']],
      ]);
      const { trait_options: options, ...traitOnly } = answer.traits[0];
      expect(traitOnly).toEqual(await getOk('/api/v1/traits/15103'));
      expect(options[0]).toEqual(await getOk('/api/v1/trait_options/15205'));
      const { traits, ...productOnly } = answer;
      expect(traits).toHaveLength(2);
      expect(productOnly).toEqual(await getOk('/api/v1/products/15001'));
    });

    it('without expand there is no traits member', async () => {
      expect(await getOk('/api/v1/products/15001')).not.toHaveProperty('traits');
    });
  });

  describe('GET /api/v1/menu?owner_id=X', () => {
    const meta = (minutes: number, ownerId = 'menu') => ({ at: at(minutes), ownerId });

    beforeAll(async () => {
      await postAll([
        menuEvent('created', collection('16001', { productIds: ['16011'] }), meta(1)),
        menuEvent('created', collection('16002'), meta(1)),
        menuEvent('created', product('16011', { traitIds: ['16021'] }), meta(1)),
        menuEvent('created', product('16012', { title: 'In no collection' }), meta(2)),
        menuEvent('created', product('16013'), meta(1)),
        destroyedEvent('product', '16013', meta(2)),
        menuEvent('created', trait('16021', { optionIds: ['16031', '16032'] }), meta(1)),
        menuEvent('created', traitOption('16031', { traitId: '16021' }), meta(1)),
        menuEvent('created', traitOption('16032', { traitId: '16021' }), meta(1)),
        menuEvent('created', collection('16009', { productIds: ['16019'] }), meta(1, 'menu-other')),
        menuEvent('created', product('16019'), meta(1, 'menu-other')),
      ]);
      await caughtUp();
    });

    async function menu(headers: Record<string, string> = {}): Promise<Answer> {
      return get('/api/v1/menu?owner_id=menu', headers);
    }

    it('holds every live collection and product of the owner, products expanded; nothing of other owners', async () => {
      const answer = await menu();
      expect(answer.status).toBe(200);
      expect(Object.keys(answer.json).sort()).toEqual(['changes_cursor', 'collections', 'products']);
      expect(ids(answer.json.collections)).toEqual(['16001', '16002']);
      expect(ids(answer.json.products)).toEqual(['16011', '16012']);
      expect(answer.json.collections[0]).toEqual(await getOk('/api/v1/collections/16001'));
      expect(answer.json.products[0]).toEqual(await getOk('/api/v1/products/16011?expand=traits'));
      expect(answer.json.products[0].traits.map((t: Json) => [t.id, ids(t.trait_options)])).toEqual([
        ['16021', ['16031', '16032']],
      ]);
      expect(answer.json.products[1]).toEqual(await getOk('/api/v1/products/16012?expand=traits'));
      expect(answer.json.products[1].traits).toEqual([]);

      const other = await getOk('/api/v1/menu?owner_id=menu-other');
      expect(ids(other.collections)).toEqual(['16009']);
      expect(ids(other.products)).toEqual(['16019']);
      expect(await getOk('/api/v1/menu?owner_id=nobody-at-all')).toEqual({
        collections: [],
        products: [],
        changes_cursor: expect.any(String),
      });
    });

    it('has an ETag; If-None-Match with it → 304; the ETag changes exactly when the content does', async () => {
      const first = await menu();
      const etag = first.headers.get('etag');
      expect(etag).toBeTruthy();
      const notModified = await menu({ 'if-none-match': etag! });
      expect(notModified.status).toBe(304);
      expect(notModified.text).toBe('');
      expect((await menu({ 'if-none-match': '"something-else"' })).status).toBe(200);

      // Deliveries that change nothing: an older update, another owner's change, an order event's copy.
      await postAll([
        menuEvent('updated', product('16012', { title: 'older than the create' }), meta(0)),
        menuEvent('updated', product('16019', { title: 'Other owner renamed' }), meta(3, 'menu-other')),
      ]);
      await caughtUp();
      const unchanged = await menu();
      expect(unchanged.headers.get('etag')).toBe(etag);
      // The content, that is: changes_cursor moves with other owners' changes (docs/reference.md §11).
      expect({ ...unchanged.json, changes_cursor: null }).toEqual({ ...first.json, changes_cursor: null });
      expect((await menu({ 'if-none-match': etag! })).status).toBe(304);

      // A newer update of a product in no collection changes the menu.
      await post(menuEvent('updated', product('16012', { title: 'Renamed' }), meta(3)));
      const renamed = await eventually(async () => {
        const answer = await menu({ 'if-none-match': etag! });
        expect(answer.status).toBe(200);
        return answer;
      });
      expect(renamed.headers.get('etag')).toBeTruthy();
      expect(renamed.headers.get('etag')).not.toBe(etag);
      expect(renamed.json.products[1].attributes.title).toBe('Renamed');

      // Deleting a trait option changes the expanded products, so the menu too.
      const etag2 = renamed.headers.get('etag')!;
      await post(destroyedEvent('trait_option', '16032', meta(4)));
      const withoutOption = await eventually(async () => {
        const answer = await menu({ 'if-none-match': etag2 });
        expect(answer.status).toBe(200);
        return answer;
      });
      expect(withoutOption.headers.get('etag')).not.toBe(etag2);
      expect(ids(withoutOption.json.products[0].traits[0].trait_options)).toEqual(['16031']);
      expect((await menu({ 'if-none-match': withoutOption.headers.get('etag')! })).status).toBe(304);
    });
  });

  describe('orders, order products and stores', () => {
    const userId = '17777';
    const menuMeta = { at: at(0), ownerId: 'orders-menu' };
    const menuBurger = product('17100', { title: 'Menu burger', traitIds: ['17200'] });
    const menuCheese = traitOption('17301', { title: 'Menu cheese', traitId: '17200' });
    let menuBurgerEvent: Json;
    const theStore = store('17800', { title: 'Corner store' });
    const parts = (status: string) => ({
      user: user(userId),
      order: order('17500', { status, orderProductIds: ['17610', '901'], storeId: '17800', userId }),
      orderProducts: [
        orderProduct('17610', { productId: '17100', optionIds: ['17701', '17702'] }),
        orderProduct('901', { productId: '17101', quantity: 2 }),
      ],
      orderProductTraitOptions: [
        orderProductTraitOption('17701', { traitOptionId: '17301' }),
        orderProductTraitOption('17702', { traitOptionId: '17302' }),
      ],
      traitOptions: [
        traitOption('17301', { title: 'Order copy cheese', traitId: '17200' }),
        traitOption('17302', { traitId: '17200' }),
      ],
      traits: [trait('17200', { optionIds: ['17301', '17302'] })],
      products: [product('17100', { title: 'Order copy burger', cents: 1 }), product('17101')],
      store: theStore,
    });
    const orderMeta = (minutes: number) => ({ at: at(minutes), ownerId: userId });
    const events: Record<string, Json> = {};

    beforeAll(async () => {
      menuBurgerEvent = menuEvent('created', menuBurger, menuMeta);
      await postAll([menuBurgerEvent, menuEvent('created', menuCheese, menuMeta)]);
      events.created = orderEvent('created', parts('pending'), orderMeta(10));
      events.cancelled = orderEvent('updated', parts('cancelled'), orderMeta(30));
      events.accepted = orderEvent('updated', parts('accepted'), orderMeta(20)); // older, arrives last
      events.small = orderEvent(
        'created',
        {
          user: user(userId),
          order: order('95', { orderProductIds: ['96'], storeId: '17800', userId }),
          orderProducts: [orderProduct('96', { productId: '17100' })],
          products: [product('17100', { title: 'Another order copy' })],
          store: theStore,
        },
        orderMeta(11),
      );
      await postAll([events.created, events.small, events.cancelled, events.accepted]);
      await caughtUp();
    });

    it('GET /api/v1/orders/{id} is the order of the newest order event, attributes and relationships verbatim', async () => {
      const answer = await getOk('/api/v1/orders/17500');
      const sent = events.cancelled.included.find((r: Json) => r.type === 'order');
      expect(answer).toMatchObject({ type: 'order', id: '17500', owner_id: userId, deleted: false });
      expect(answer.attributes).toEqual(sent.attributes);
      expect(answer.relationships).toEqual(sent.relationships);
      expect(answer.version).toMatchObject({ event_id: events.cancelled.data.id, occurred_at: at(30) });
    });

    it('GET /api/v1/orders/{id}?expand=order_products adds order products with their trait options', async () => {
      const answer = await getOk('/api/v1/orders/17500?expand=order_products');
      // The contract does not say in which order; each order product carries its trait options in relationship order.
      const expanded = answer.order_products.map((op: Json) => [op.id, ids(op.order_product_trait_options)]);
      expect(expanded).toHaveLength(2);
      expect(expanded).toEqual(
        expect.arrayContaining([
          ['17610', ['17701', '17702']],
          ['901', []],
        ]),
      );
      const { order_product_trait_options: options, ...first } = answer.order_products.find(
        (op: Json) => op.id === '17610',
      );
      expect(first).toEqual(await getOk('/api/v1/order_products/17610'));
      expect(first.relationships).toEqual(parts('x').orderProducts[0].relationships);
      expect(options[1]).toMatchObject({
        type: 'order_product_trait_option',
        id: '17702',
        attributes: parts('x').orderProductTraitOptions[1].attributes,
        relationships: { trait_option: { data: { id: '17302', type: 'trait_option' } } },
        deleted: false,
      });
      expect(await getOk('/api/v1/orders/17500')).not.toHaveProperty('order_products');
    });

    it('lists orders, order_products and stores by owner, ids numerically', async () => {
      expect(ids((await getOk(`/api/v1/orders?owner_id=${userId}`)).data)).toEqual(['95', '17500']);
      expect(ids((await getOk(`/api/v1/order_products?owner_id=${userId}`)).data)).toEqual(['96', '901', '17610']);
      const stores = (await getOk(`/api/v1/stores?owner_id=${userId}`)).data;
      expect(ids(stores)).toEqual(['17800']);
      const { items } = await listAll(`/api/v1/order_products?owner_id=${userId}`, 1);
      expect(ids(items)).toEqual(['96', '901', '17610']);
      expect((await getOk('/api/v1/orders?owner_id=orders-menu')).data).toEqual([]);
    });

    it('the store from the order event is at /api/v1/stores/{id}', async () => {
      const answer = await getOk('/api/v1/stores/17800');
      expect(answer).toMatchObject({ type: 'store', id: '17800', owner_id: userId, deleted: false });
      expect(answer.attributes).toEqual(theStore.attributes);
      expect(answer.relationships).toEqual(theStore.relationships);
    });

    it('an older order.updated delivered last changes nothing', async () => {
      expect((await getOk('/api/v1/orders/17500')).attributes.status).toBe('cancelled');
    });

    it('menu resources inside order events do not change the menu', async () => {
      const burger = await getOk('/api/v1/products/17100');
      expect(burger.attributes).toEqual(menuBurger.attributes);
      expect(burger.version.event_id).toBe(menuBurgerEvent.data.id);
      expect((await getOk('/api/v1/trait_options/17301')).attributes.title).toBe('Menu cheese');
      expectProblem(await get('/api/v1/products/17101'), 404);
      expectProblem(await get('/api/v1/traits/17200'), 404);
      expectProblem(await get('/api/v1/trait_options/17302'), 404);
      expect(ids((await getOk('/api/v1/products?owner_id=orders-menu')).data)).toEqual(['17100']);
      expect(menuContent(await getOk(`/api/v1/menu?owner_id=${userId}`))).toEqual({ collections: [], products: [] });
    });

    it('as_of on orders folds the order events up to then, whatever their arrival order', async () => {
      expectProblem(await get(`/api/v1/orders/17500?as_of=${at(5)}`), 404);
      expect((await getOk(`/api/v1/orders/17500?as_of=${at(15)}`)).attributes.status).toBe('pending');
      expect((await getOk(`/api/v1/orders/17500?as_of=${at(25)}`)).attributes.status).toBe('accepted');
      expect((await getOk(`/api/v1/orders/17500?as_of=${at(30)}`)).attributes.status).toBe('cancelled');
      const listed = (await getOk(`/api/v1/orders?owner_id=${userId}&as_of=${at(10)}`)).data;
      expect(listed.map((o: Json) => [o.id, o.attributes.status])).toEqual([['17500', 'pending']]);
      const expanded = await getOk(`/api/v1/orders/17500?expand=order_products&as_of=${at(15)}`);
      expect(ids(expanded.order_products).sort()).toEqual(['17610', '901']);
      expectProblem(await get(`/api/v1/stores/17800?as_of=${at(5)}`), 404);
    });
  });

  describe('as_of on menu reads', () => {
    const meta = (minutes: number) => ({ at: at(minutes), ownerId: 'asof' });
    const events: Record<string, Json> = {};

    beforeAll(async () => {
      events.created = menuEvent('created', product('18001', { title: 'v1', traitIds: ['18101'] }), meta(10));
      events.updated = menuEvent('updated', product('18001', { title: 'v3', traitIds: ['18101'] }), meta(30));
      events.destroyed = destroyedEvent('product', '18001', meta(50));
      // Delivered out of order on purpose: as_of folds the set of events.
      await postAll([
        events.updated,
        menuEvent('created', collection('18301', { productIds: ['18001'] }), meta(10)),
        menuEvent('created', trait('18101', { optionIds: ['18201'] }), meta(20)),
        menuEvent('created', traitOption('18201', { traitId: '18101' }), meta(40)),
        events.destroyed,
        events.created,
      ]);
      await caughtUp();
    });

    it('GET /api/v1/products/{id}?as_of: before creation 404, between updates the older state, after the destroy 410', async () => {
      expectProblem(await get(`/api/v1/products/18001?as_of=${at(5)}`), 404);
      const first = await getOk(`/api/v1/products/18001?as_of=${at(20)}`);
      expect(first.attributes.title).toBe('v1');
      expect(first.version).toMatchObject({ event_id: events.created.data.id, occurred_at: at(10) });
      expect(first.deleted).toBe(false);
      // as_of is inclusive (occurred_at ≤ as_of), in any offset.
      expect((await getOk(`/api/v1/products/18001?as_of=${at(30)}`)).attributes.title).toBe('v3');
      expect(at(25)).toBe('2024-05-01T10:25:00.000Z');
      expect(
        (await getOk(`/api/v1/products/18001?as_of=${encodeURIComponent('2024-05-01T12:25:00.000+02:00')}`)).attributes
          .title,
      ).toBe('v1');
      expect(
        (await getOk(`/api/v1/products/18001?as_of=${encodeURIComponent('2024-05-01T12:35:00+02:00')}`)).attributes
          .title,
      ).toBe('v3');
      expect((await getOk(`/api/v1/products/18001?as_of=${at(45)}`)).attributes.title).toBe('v3');
      const gone = await get(`/api/v1/products/18001?as_of=${at(60)}`);
      expect(gone.status).toBe(410);
      expect(gone.json).toMatchObject({ id: '18001', deleted: true, version: { event_id: events.destroyed.data.id } });
      expect((await get('/api/v1/products/18001')).status).toBe(410);
      // The live read model and as_of after the last event agree.
      expect(gone.json).toEqual((await get('/api/v1/products/18001')).json);
    });

    it('as_of applies to other item reads and to expand=traits', async () => {
      expectProblem(await get(`/api/v1/collections/18301?as_of=${at(5)}`), 404);
      expect((await getOk(`/api/v1/collections/18301?as_of=${at(10)}`)).id).toBe('18301');
      expectProblem(await get(`/api/v1/traits/18101?as_of=${at(15)}`), 404);
      expectProblem(await get(`/api/v1/trait_options/18201?as_of=${at(35)}`), 404);
      expect((await getOk(`/api/v1/products/18001?expand=traits&as_of=${at(15)}`)).traits).toEqual([]);
      const before = await getOk(`/api/v1/products/18001?expand=traits&as_of=${at(25)}`);
      expect(before.traits.map((t: Json) => [t.id, ids(t.trait_options)])).toEqual([['18101', []]]);
      const after = await getOk(`/api/v1/products/18001?expand=traits&as_of=${at(45)}`);
      expect(after.traits.map((t: Json) => [t.id, ids(t.trait_options)])).toEqual([['18101', ['18201']]]);
    });

    it('lists take as_of', async () => {
      const listed = (await getOk(`/api/v1/products?owner_id=asof&as_of=${at(20)}`)).data;
      expect(listed.map((p: Json) => [p.id, p.attributes.title])).toEqual([['18001', 'v1']]);
      expect(listed[0]).toEqual(await getOk(`/api/v1/products/18001?as_of=${at(20)}`));
      expect((await getOk(`/api/v1/products?owner_id=asof&as_of=${at(5)}`)).data).toEqual([]);
      expect((await getOk(`/api/v1/products?owner_id=asof&as_of=${at(60)}`)).data).toEqual([]);
      const withDeleted = (await getOk(`/api/v1/products?owner_id=asof&as_of=${at(60)}&include_deleted=true`)).data;
      expect(withDeleted.map((p: Json) => [p.id, p.deleted])).toEqual([['18001', true]]);
      expect(ids((await getOk(`/api/v1/trait_options?owner_id=asof&as_of=${at(45)}`)).data)).toEqual(['18201']);
      expect((await getOk(`/api/v1/trait_options?owner_id=asof&as_of=${at(35)}`)).data).toEqual([]);
    });

    it('GET /api/v1/menu?owner_id=X&as_of= returns the older menu', async () => {
      const older = await get(`/api/v1/menu?owner_id=asof&as_of=${at(25)}`);
      expect(older.status).toBe(200);
      expect(ids(older.json.collections)).toEqual(['18301']);
      expect(older.json.products.map((p: Json) => [p.id, p.attributes.title, ids(p.traits)])).toEqual([
        ['18001', 'v1', ['18101']],
      ]);
      const live = await get('/api/v1/menu?owner_id=asof');
      expect(ids(live.json.collections)).toEqual(['18301']);
      expect(live.json.products).toEqual([]);
      expect(older.headers.get('etag')).toBeTruthy();
      expect(older.headers.get('etag')).not.toBe(live.headers.get('etag'));
      const latest = await get(`/api/v1/menu?owner_id=asof&as_of=${at(60)}`);
      expect(menuContent(latest.json)).toEqual(menuContent(live.json));
      expect(menuContent(await getOk(`/api/v1/menu?owner_id=asof&as_of=${at(5)}`))).toEqual({
        collections: [],
        products: [],
      });
    });
  });

  describe('GET /api/v1/projections', () => {
    it('lists menu and orders: caught up (lag 0), running, nothing parked', async () => {
      await caughtUp();
      const answer = await getOk('/api/v1/projections');
      expect(answer.data.map((p: Json) => p.name).sort()).toEqual(['menu', 'orders']);
      for (const projection of answer.data) {
        expect(Object.keys(projection).sort()).toEqual([
          'head',
          'lag',
          'last_error',
          'name',
          'parked',
          'position',
          'state',
        ]);
        expect(projection).toMatchObject({
          lag: 0,
          state: 'running',
          parked: 0,
          last_error: null,
          head: highestPosition,
        });
        expect(projection.position).toBeGreaterThan(0);
        expect(projection.position).toBeLessThanOrEqual(projection.head);
      }
    });
  });

  describe('a poisoned event (a JSON \\u0000 escape in the included subject)', () => {
    const later = '2030-01-01T00:00:00.000Z';
    let poisonedPosition: number;
    /** The six characters \u0000 as a JSON escape: valid JSON, which a PostgreSQL jsonb cannot hold. */
    const poison = (event: Json) => JSON.stringify(event).replace('"NOTE"', '"a\\u0000b"');

    beforeAll(async () => {
      const body = poison(
        menuEvent('created', product('19001', { extra: { note: 'NOTE' } }), { at: at(1), ownerId: 'poison' }),
      );
      expect(body).toContain('"a\\u0000b"');
      const answer = await post(body);
      expect(answer.json).toMatchObject({ status: 'accepted', position: expect.any(Number) });
      poisonedPosition = answer.json.position;
    });

    it('is accepted (202) and kept in the log byte for byte', async () => {
      const raw = await get(`/api/v1/events/${poisonedPosition}/raw`);
      expect(raw.status).toBe(200);
      expect(raw.text).toContain('"a\\u0000b"');
    });

    it('is parked by the menu projection, shown in /api/v1/projections, and blocks nothing after it', async () => {
      const menu = await eventually(async () => {
        const status = await getOk('/api/v1/projections');
        const found = status.data.find((p: Json) => p.name === 'menu');
        expect(found.parked).toBeGreaterThanOrEqual(1);
        return found;
      });
      expect(typeof menu.last_error).toBe('string');
      expect(menu.last_error.length).toBeGreaterThan(0);
      expectProblem(await get('/api/v1/products/19001'), 404);

      await post(
        menuEvent('created', product('19002', { title: 'After the poison' }), { at: at(2), ownerId: 'poison' }),
      );
      await eventually(async () => {
        expect((await getOk('/api/v1/products/19002')).attributes.title).toBe('After the poison');
      });
      await caughtUp();
      const after = (await getOk('/api/v1/projections')).data;
      expect(after.map((p: Json) => [p.name, p.lag, p.state])).toEqual(
        expect.arrayContaining([
          ['menu', 0, 'running'],
          ['orders', 0, 'running'],
        ]),
      );
      expect(ids((await getOk('/api/v1/menu?owner_id=poison')).products)).toEqual(['19002']);
    });

    it('does not break as_of reads of the menu (a parked event blocks nothing else; never a 5XX)', async () => {
      const menuAsOf = await get(`/api/v1/menu?owner_id=menu&as_of=${later}`);
      expect({ status: menuAsOf.status, text: menuAsOf.status === 200 ? '' : menuAsOf.text }).toEqual({
        status: 200,
        text: '',
      });
      expect(menuContent(menuAsOf.json)).toEqual(menuContent(await getOk('/api/v1/menu?owner_id=menu')));
      const list = await get(`/api/v1/products?as_of=${later}&limit=1000`);
      expect(list.status).toBe(200);
      expect(ids(list.json.data)).toEqual(ids((await getOk('/api/v1/products?limit=1000')).data));
      const poisonMenu = await get(`/api/v1/menu?owner_id=poison&as_of=${later}`);
      expect(poisonMenu.status).toBe(200);
      expect(ids(poisonMenu.json.products)).toEqual(['19002']);
      expect((await get(`/api/v1/products/19001?as_of=${later}`)).status).toBeLessThan(500);
    });

    it('in an order event: parked by the orders projection; later orders and as_of reads of orders still work', async () => {
      const parkedBefore = (await getOk('/api/v1/projections')).data.find((p: Json) => p.name === 'orders').parked;
      const orderParts = (id: string, note: string) => ({
        user: user('19777'),
        order: order(id, { orderProductIds: [`${id}1`], storeId: '19800', userId: '19777', note }),
        orderProducts: [orderProduct(`${id}1`, { productId: '19002' })],
        store: store('19800'),
      });
      await post(poison(orderEvent('created', orderParts('19500', 'NOTE'), { at: at(1), ownerId: '19777' })));
      await eventually(async () => {
        const orders = (await getOk('/api/v1/projections')).data.find((p: Json) => p.name === 'orders');
        expect(orders.parked).toBeGreaterThan(parkedBefore);
        expect(typeof orders.last_error).toBe('string');
      });
      await post(orderEvent('created', orderParts('19501', 'fine'), { at: at(2), ownerId: '19777' }));
      await eventually(async () => {
        expect((await getOk('/api/v1/orders/19501')).attributes.note).toBe('fine');
      });
      expectProblem(await get('/api/v1/orders/19500'), 404);
      const ordersAsOf = await get(`/api/v1/orders?owner_id=17777&as_of=${later}`);
      expect({ status: ordersAsOf.status, text: ordersAsOf.status === 200 ? '' : ordersAsOf.text }).toEqual({
        status: 200,
        text: '',
      });
      expect(ids(ordersAsOf.json.data)).toEqual(['95', '17500']);
      expect((await get(`/api/v1/orders/19501?as_of=${later}`)).status).toBe(200);
    });
  });

  describe("plain reads, answered outside Nest's pipeline (query/direct-reads.ts), answer as the pipeline does", () => {
    // A plain query takes the direct path; the same read with a parameter that changes nothing
    // (updated_since at the epoch, expand on a tombstone or an unknown id) goes through Nest's pipeline.
    const answerOf = (answer: Answer) => ({
      status: answer.status,
      type: answer.headers.get('content-type'),
      cursor: answer.headers.get('x-changes-cursor'),
      body: answer.json,
    });

    beforeAll(async () => {
      await postAll(
        ['29001', '29002', '29003'].map((id) => menuEvent('created', product(id), { at: at(1), ownerId: 'direct' })),
      );
      await post(destroyedEvent('product', '29003', { at: at(2), ownerId: 'direct' }));
      await caughtUp();
    });

    it('pages, with their X-Changes-Cursor', async () => {
      const epoch = 'updated_since=1970-01-01T00:00:00.000Z';
      const first = answerOf(await get('/api/v1/products?owner_id=direct&limit=2'));
      expect(first.body.next_cursor).toEqual(expect.any(String));
      for (const query of [
        'owner_id=direct&limit=2',
        `include_deleted=true&owner_id=direct&cursor=${first.body.next_cursor}`,
      ]) {
        const plain = answerOf(await get(`/api/v1/products?${query}`));
        expect(plain.status).toBe(200);
        expect(plain.cursor).toBe(plain.body.changes_cursor);
        expect(plain.body.data.length).toBeGreaterThan(0);
        expect(answerOf(await get(`/api/v1/products?${query}&${epoch}`))).toEqual(plain);
      }
    });

    it('a tombstone (410) and an unknown id (404)', async () => {
      for (const [id, status] of [
        ['29003', 410],
        ['29999', 404],
      ] as const) {
        const plain = answerOf(await get(`/api/v1/products/${id}`));
        expect(plain.status).toBe(status);
        expect(answerOf(await get(`/api/v1/products/${id}?expand=traits`))).toEqual(plain);
      }
    });
  });

  it('/api/docs-json lists the /api/v1 paths (no token needed)', async () => {
    const answer = await api(app.url, '/api/docs-json', null);
    expect(answer.status).toBe(200);
    const paths = Object.keys(answer.json.paths);
    for (const name of ALL_LISTS) {
      expect(paths).toContain(`/api/v1/${name}`);
      expect(paths).toContain(`/api/v1/${name}/{id}`);
    }
    expect(paths).toEqual(expect.arrayContaining(['/api/v1/menu', '/api/v1/projections']));
  });
});

import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { SINGLE_LOCKS } from '../src/database/advisory-locks.js';
import type { RunningEmulator } from '../src/emulator/emulator.factory.js';
import type { TokenAnswer } from '../src/emulator/oauth/oauth-server.service.js';
import {
  bootEmulator,
  call,
  clientOf,
  control,
  postToken,
  recordIssuedTokens,
  Reply,
} from './emulator/emulator-client.js';
import { changesAfter } from './support/changes.js';
import { CliResult, describeRun, runCli, spawnCli } from './support/cli.js';
import { connect, startDaemonOn } from './support/connect.js';
import { eventually } from './support/eventually.js';
import { api, deliver, RunningDaemon } from './support/http.js';
import { Json, menuEvent, product } from './support/menu-events.js';
import { expectedFrom, expectMirrorEquals, MENU_LISTS, MIRRORED_LISTS, mirrorOf } from './support/mirror.js';
import type { Compared, MirroredList } from './support/mirror.js';

/**
 * Reconcile against the emulator (issue 7, docs/reference.md §7, §8): the run right after connecting
 * imports the demo menu; changes whose deliveries the platform gave up on (every one of the 6
 * attempts failed) are healed by `menu-sync reconcile`, after which the query API equals the
 * emulator's state and a second run appends nothing; a webhook newer than the fetch still wins and
 * an older one arriving later does not undo the reconcile; replay reproduces the healed read model;
 * a snapshot answered with 500s or garbage, or an implausible one, destroys nothing and says so;
 * so does a run limited by --store, or over an owner with two stores (menu resources carry no
 * store); another owner's store in STORE_IDS is left out with a note; a connection whose grant was
 * revoked is skipped and named.
 * One emulator in this process, one built daemon connected to it through the real OAuth flow.
 */

const OWNER = '4001';
const STORE = '1';
const SINGULAR: Record<string, string> = {
  collections: 'collection',
  products: 'product',
  traits: 'trait',
  trait_options: 'trait_option',
  orders: 'order',
};
type Kind = 'created' | 'updated' | 'destroyed';

let emulator: RunningEmulator;
let daemon: RunningDaemon;
/** Every token answer the emulator gave. */
let issued: TokenAnswer[] = [];

const ok = (reply: Reply, what: string): Json => {
  if (reply.status >= 300) throw new Error(`${what}: ${reply.status} ${reply.text}`);
  return reply.json;
};
const emulatorState = async (): Promise<Json> => ok(await call(emulator, '/_emulator/state'), 'state');
const change = async (method: string, path: string, body?: unknown): Promise<Json> =>
  ok(await control(emulator, method, path, body), `${method} ${path}`);
const setFaults = (faults: Record<string, unknown>) => change('POST', '/_emulator/faults', faults);
const ids = (list: Json[]): string[] => list.map((resource) => resource.id);

/** The daemon's environment, for a command beside it. */
function cliEnv(extraEnv: Record<string, string> = {}): Record<string, string> {
  const env = { ...daemon.process.env, ...extraEnv };
  delete env.PATH;
  delete env.HOME;
  return env;
}

async function cli(args: string[], extraEnv: Record<string, string> = {}): Promise<CliResult> {
  return runCli(args, cliEnv(extraEnv), daemon.process.cwd);
}

/** The run `menu-sync reconcile` printed (`{"data": run}`, indented JSON on stdout). */
function printedRun(result: CliResult): Json {
  const document = /^\{\n[\s\S]*?^\}$/m.exec(result.stdout);
  if (!document) throw new Error(`no JSON document in the output:\n${describeRun(result)}`);
  return JSON.parse(document[0]).data;
}

/** `menu-sync reconcile [args]`: expects the exit code, returns the run it printed (`{"data": run}`, indented JSON on stdout). */
async function reconcile(expectedCode = 0, args: string[] = [], extraEnv: Record<string, string> = {}): Promise<Json> {
  const result = await cli(['reconcile', ...args], extraEnv);
  expect({ code: result.code, run: result.code === expectedCode ? '' : describeRun(result) }).toEqual({
    code: expectedCode,
    run: '',
  });
  return printedRun(result);
}

/**
 * Makes `changes` while every delivery fails all 6 attempts (the platform then gives up), waits
 * until nothing is pending, checks that each new event was tried 6 times and never delivered,
 * and clears the faults. Returns the events the changes produced.
 */
async function whileDeliveriesFail(changes: () => Promise<void>): Promise<Json[]> {
  const known = new Set(
    (ok(await call(emulator, '/_emulator/events'), 'events').data as Json[]).map((event) => event.event_id as string),
  );
  await setFaults({ fail_first_attempts: 6 });
  await changes();
  const events = (ok(await call(emulator, '/_emulator/events'), 'events').data as Json[]).filter(
    (event) => !known.has(event.event_id),
  );
  expect(events.length).toBeGreaterThan(0);
  await eventually(
    async () => {
      const deliveries = ok(await call(emulator, '/_emulator/deliveries'), 'deliveries');
      expect(deliveries.pending).toBe(0);
      const attempts = new Map<string, number[]>();
      for (const attempt of deliveries.data as Json[]) {
        if (!known.has(attempt.event_id))
          attempts.set(attempt.event_id, [...(attempts.get(attempt.event_id) ?? []), attempt.status]);
      }
      expect(Object.fromEntries(attempts)).toEqual(
        Object.fromEntries(events.map((event) => [event.event_id, [0, 0, 0, 0, 0, 0]])),
      );
    },
    15_000,
    50,
  );
  await setFaults({});
  return events;
}

/** Waits until every projection has applied the whole log. */
async function projected(): Promise<void> {
  await eventually(
    async () => {
      const status = await api(daemon.url, '/api/v1/projections');
      expect(status.json.data.map((projection: Json) => [projection.name, projection.lag, projection.parked])).toEqual(
        status.json.data.map((projection: Json) => [projection.name, 0, 0]),
      );
    },
    15_000,
    100,
  );
}

/** The query API equals the emulator's state for these lists, once the projector has caught up. */
async function expectInSync(names: readonly MirroredList[] = MIRRORED_LISTS): Promise<void> {
  const state = await emulatorState();
  await eventually(() => expectMirrorEquals(daemon.url, state, names), 15_000, 200);
}

/** The differences reconcile should find between the mirror and the emulator's state, by kind and type (orders are never destroyed). */
function differencesBetween(
  mirror: Record<string, Record<string, Compared>>,
  state: Json,
): Record<Kind, Record<string, number>> {
  const found: Record<Kind, Record<string, number>> = { created: {}, updated: {}, destroyed: {} };
  const count = (kind: Kind, type: string, n: number) => {
    if (n > 0) found[kind][type] = n;
  };
  for (const name of [...MENU_LISTS, 'orders'] as const) {
    const before = mirror[name];
    const after = expectedFrom(state, name, OWNER);
    const both = Object.keys(after).filter((id) => id in before);
    count('created', SINGULAR[name], Object.keys(after).length - both.length);
    count('updated', SINGULAR[name], both.filter((id) => !isDeepStrictEqual(before[id], after[id])).length);
    if (name !== 'orders')
      count('destroyed', SINGULAR[name], Object.keys(before).filter((id) => !(id in after)).length);
  }
  return found;
}

const total = (differences: Record<Kind, Record<string, number>>) =>
  Object.values(differences)
    .flatMap((byType) => Object.values(byType))
    .reduce((sum, n) => sum + n, 0);

/** Log entries after `position`, every page. */
async function eventsAfter(position: number): Promise<Json[]> {
  const out: Json[] = [];
  let after = position;
  for (;;) {
    const page = await api(daemon.url, `/api/v1/events?after=${after}&limit=1000`);
    expect(page.status).toBe(200);
    out.push(...page.json.data);
    if (page.json.data.length === 0 || page.json.next_cursor === null) return out;
    after = page.json.data.at(-1).position;
  }
}

const head = async (): Promise<number> =>
  Math.max(0, ...(await api(daemon.url, '/api/v1/projections')).json.data.map((projection: Json) => projection.head));

/** The version (occurred_at) of the reconcile event a run appended for one resource. */
async function reconcileVersionOf(type: string, id: string): Promise<string> {
  const listed = await api(daemon.url, `/api/v1/events?subject_type=${type}&subject_id=${id}&limit=1000`);
  const mine = listed.json.data.filter((event: Json) => event.source === 'reconcile');
  expect(mine.length).toBeGreaterThan(0);
  return mine.at(-1).occurred_at;
}

const getProduct = async (id: string): Promise<Json> => (await api(daemon.url, `/api/v1/products/${id}`)).json;

beforeAll(async () => {
  emulator = await bootEmulator({ demoData: true, retryScheduleMs: [10, 10, 10, 10, 10] });
  issued = recordIssuedTokens(emulator);
  daemon = await startDaemonOn(emulator, { STORE_IDS: STORE });
}, 120_000);

afterAll(async () => {
  await daemon?.close();
  await emulator?.close();
});

/** The demo menu's ids, as imported. */
let demo: Json;
/** The resources the healed changes touched. */
const touched: Record<string, string> = {};
/** The run that healed them. */
let healed: Json;

it('imports the demo menu in the run right after a connection is made', async () => {
  const connection = await connect(daemon.url);
  expect(connection).toMatchObject({ id: 1, state: 'active', mode: 'configured' });
  const [run] = await eventually(
    async () => {
      const runs = (await api(daemon.url, '/api/v1/reconcile/runs')).json.data;
      expect(runs).toHaveLength(1);
      return runs;
    },
    30_000,
    100,
  );
  expect(run).toEqual({
    id: expect.any(Number),
    trigger: 'connection',
    started_at: expect.any(String),
    finished_at: expect.any(String),
    outcome: 'ok',
    errors: [],
    notes: [],
    stores: [
      {
        connection_id: 1,
        store_id: STORE,
        owner_id: OWNER,
        checked: { collection: 4, product: 30, trait: 6, trait_option: 20, order: 0 },
        differences: {
          created: { collection: 4, product: 30, trait: 6, trait_option: 20 },
          updated: {},
          destroyed: {},
        },
        events_appended: 60,
        errors: [],
        notes: [],
        duration_ms: expect.any(Number),
      },
    ],
  });
  const events = await eventsAfter(0);
  expect(events.filter((event) => event.source === 'reconcile')).toHaveLength(60);
  await expectInSync(MENU_LISTS);
  demo = await emulatorState();
});

describe('changes the platform gave up delivering', () => {
  let mirrorBefore: Record<string, Record<string, Compared>>;
  let headBefore: number;

  it('stay out of the mirror while every delivery fails all 6 attempts', async () => {
    const products = ids(demo.products);
    const withTraits = demo.products.find(
      (item: Json) => item.id !== products[0] && item.id !== products[1] && item.relationships.traits.data.length > 0,
    );
    const orderedTrait = demo.traits.find((item: Json) => item.id === withTraits.relationships.traits.data[0].id);
    const orderedOption = orderedTrait.relationships.trait_options.data[0].id;
    const otherOptions = ids(demo.trait_options).filter((id) => id !== orderedOption);
    Object.assign(touched, {
      updatedProduct: products[0],
      destroyedProduct: products[1],
      orderedProduct: withTraits.id,
      orderedOption,
      updatedOption: otherOptions[0],
      destroyedOption: otherOptions[1],
      updatedCollection: demo.collections[0].id,
      destroyedCollection: demo.collections.at(-1).id,
      updatedTrait: demo.traits[0].id,
    });
    mirrorBefore = await mirrorOf(daemon.url);
    headBefore = await head();

    const events = await whileDeliveriesFail(async () => {
      touched.createdTrait = (
        await change('POST', '/_emulator/traits', { attributes: { title: 'Sauce', required: false } })
      ).id;
      touched.createdOption = (
        await change('POST', '/_emulator/trait_options', {
          attributes: { title: 'Ketchup', cost_adjustment: { GBP: 20 } },
          relationships: { trait: touched.createdTrait },
        })
      ).id;
      touched.createdProduct = (
        await change('POST', '/_emulator/products', {
          attributes: { title: 'Soup of the day', base_cost: { GBP: 650 } },
          relationships: { traits: [touched.createdTrait] },
        })
      ).id;
      touched.createdCollection = (
        await change('POST', '/_emulator/collections', {
          attributes: { title: 'Specials' },
          relationships: { products: [touched.createdProduct] },
        })
      ).id;
      await change('PATCH', `/_emulator/products/${touched.updatedProduct}`, {
        attributes: { available: false, base_cost: { GBP: 999 } },
      });
      await change('PATCH', `/_emulator/trait_options/${touched.updatedOption}`, { attributes: { available: false } });
      await change('PATCH', `/_emulator/collections/${touched.updatedCollection}`, {
        attributes: { description: 'All day' },
      });
      await change('PATCH', `/_emulator/traits/${touched.updatedTrait}`, { attributes: { allow_multiple: true } });
      await change('DELETE', `/_emulator/products/${touched.destroyedProduct}`);
      await change('DELETE', `/_emulator/trait_options/${touched.destroyedOption}`);
      await change('DELETE', `/_emulator/collections/${touched.destroyedCollection}`);
      touched.order = (
        await change('POST', '/_emulator/orders', {
          store_id: STORE,
          order_products: [{ product_id: touched.orderedProduct, quantity: 2, trait_option_ids: [orderedOption] }],
        })
      ).id;
      await change('PATCH', `/_emulator/orders/${touched.order}`, { attributes: { status: 'accepted' } });
    });
    expect(new Set(events.map((event) => event.event_type))).toEqual(
      new Set([
        'trait.created',
        'trait_option.created',
        'trait.updated',
        'product.created',
        'collection.created',
        'product.updated',
        'trait_option.updated',
        'collection.updated',
        'product.destroyed',
        'trait_option.destroyed',
        'collection.destroyed',
        'order.created',
        'order.updated',
      ]),
    );

    expect(await head()).toBe(headBefore);
    expect(await mirrorOf(daemon.url)).toEqual(mirrorBefore);
    expect((await api(daemon.url, `/api/v1/products/${touched.createdProduct}`)).status).toBe(404);
    expect((await api(daemon.url, `/api/v1/products/${touched.destroyedProduct}`)).status).toBe(200);
    expect((await getProduct(touched.updatedProduct)).attributes.available).toBe(true);
    expect((await api(daemon.url, '/api/v1/orders')).json.data).toEqual([]);
  });

  it('are healed by `menu-sync reconcile`, whose report counts the differences by kind', async () => {
    const expected = differencesBetween(mirrorBefore, await emulatorState());
    expect(expected).toEqual({
      created: { collection: 1, product: 1, trait: 1, trait_option: 1, order: 1 },
      updated: expect.objectContaining({
        collection: expect.any(Number),
        product: 1,
        trait: expect.any(Number),
        trait_option: 1,
      }),
      destroyed: { collection: 1, product: 1, trait_option: 1 },
    });
    const { cursor } = await changesAfter(daemon.url);
    healed = await reconcile();
    expect(healed).toMatchObject({ trigger: 'command', outcome: 'ok', errors: [] });
    expect(healed.stores).toEqual([
      expect.objectContaining({
        connection_id: 1,
        store_id: STORE,
        owner_id: OWNER,
        differences: expected,
        events_appended: total(expected),
        errors: [],
        notes: [],
      }),
    ]);
    expect(healed.stores[0].checked).toEqual({ collection: 4, product: 30, trait: 7, trait_option: 20, order: 1 });

    await expectInSync();
    const appended = await eventsAfter(headBefore);
    expect(appended).toHaveLength(total(expected));
    expect(appended.map((event) => [event.source, event.owner_id])).toEqual(appended.map(() => ['reconcile', OWNER]));
    expect(appended.map((event) => `${event.subject.type} ${event.subject.id}`)).toEqual(
      expect.arrayContaining([
        `product ${touched.createdProduct}`,
        `product ${touched.updatedProduct}`,
        `product ${touched.destroyedProduct}`,
        `order ${touched.order}`,
      ]),
    );
    expect(
      appended.find((event) => event.subject.id === touched.destroyedProduct && event.subject.type === 'product')
        .event_type,
    ).toBe('product.destroyed');
    // Reconcile's events are filterable like any other.
    const orderEvents = (await api(daemon.url, `/api/v1/events?subject_type=order&subject_id=${touched.order}`)).json
      .data;
    expect(orderEvents.map((event: Json) => [event.event_type, event.source])).toEqual([
      ['order.created', 'reconcile'],
    ]);
    // The repairs flow out through the change feed like any change (reference §11); orders are not published by default.
    await eventually(
      async () => {
        const flowed = (await changesAfter(daemon.url, cursor)).changes.map((c: Json) => `${c.op} ${c.type}/${c.id}`);
        expect(flowed).toEqual(
          expect.arrayContaining([
            `upsert product/${touched.createdProduct}`,
            `upsert product/${touched.updatedProduct}`,
            `delete product/${touched.destroyedProduct}`,
            `upsert collection/${touched.createdCollection}`,
            `delete trait_option/${touched.destroyedOption}`,
          ]),
        );
        expect(flowed.filter((entry: string) => entry.includes('order'))).toEqual([]);
        expect(flowed).toHaveLength(total(expected) - 1);
      },
      15000,
      100,
    );
  });

  it('a second reconcile appends nothing; the runs are listed newest first', async () => {
    const headBeforeSecond = await head();
    const second = await reconcile();
    expect(second).toMatchObject({ outcome: 'ok', errors: [] });
    expect(second.stores).toEqual([
      expect.objectContaining({
        differences: { created: {}, updated: {}, destroyed: {} },
        events_appended: 0,
        errors: [],
        notes: [],
      }),
    ]);
    expect(await head()).toBe(headBeforeSecond);

    const runs = (await api(daemon.url, '/api/v1/reconcile/runs')).json.data;
    expect(runs.map((run: Json) => [run.id, run.trigger])).toEqual([
      [second.id, 'command'],
      [healed.id, 'command'],
      [expect.any(Number), 'connection'],
    ]);
    expect(runs[1].id).toBeGreaterThan(runs[2].id);
    expect(runs[1]).toEqual(healed);
  });
});

describe('versions: the fetch time', () => {
  it('a webhook created after the fetch wins over the reconcile event, even in the same millisecond', async () => {
    const fetchedAt = await reconcileVersionOf('product', touched.updatedProduct);
    expect(Date.parse(fetchedAt)).toBeGreaterThanOrEqual(Date.parse(healed.started_at));
    expect(Date.parse(fetchedAt)).toBeLessThanOrEqual(Date.parse(healed.finished_at));
    // Same millisecond as the fetch: attributes.id 1 beats the reconcile event's 0.
    const sameInstant = menuEvent(
      'updated',
      product(touched.updatedProduct, { title: 'Renamed by a webhook', cents: 1234 }),
      { at: fetchedAt, ownerId: OWNER, seq: 1 },
    );
    const later = menuEvent('updated', product(touched.createdProduct, { title: 'Soup, renamed by a webhook' }), {
      at: new Date(),
      ownerId: OWNER,
    });
    for (const body of [sameInstant, later]) expect((await deliver(daemon.url, body)).status).toBe(202);
    await projected();
    for (const body of [sameInstant, later]) {
      const shown = await getProduct(body.data.relationships.subject.data.id);
      expect({
        attributes: shown.attributes,
        relationships: shown.relationships,
        event: shown.version.event_id,
      }).toEqual({
        attributes: body.included[0].attributes,
        relationships: body.included[0].relationships,
        event: body.data.id,
      });
    }
  });

  it('an event created before a reconcile fetch, arriving after it, does not undo what reconcile found', async () => {
    await whileDeliveriesFail(async () => {
      await change('PATCH', `/_emulator/products/${touched.updatedProduct}`, {
        attributes: { title: 'Renamed upstream' },
      });
    });
    const run = await reconcile();
    // The webhooks' content differs from the platform's for both products.
    expect(run.stores[0]).toMatchObject({
      differences: { created: {}, updated: { product: 2 }, destroyed: {} },
      events_appended: 2,
    });
    await expectInSync();
    const fetchedAt = await reconcileVersionOf('product', touched.updatedProduct);
    const reconciled = await getProduct(touched.updatedProduct);
    expect(reconciled.attributes.title).toBe('Renamed upstream');

    const stale = menuEvent('updated', product(touched.updatedProduct, { title: 'A stale webhook' }), {
      at: new Date(Date.parse(fetchedAt) - 1),
      ownerId: OWNER,
      seq: 1_000_000,
    });
    const accepted = await deliver(daemon.url, stale);
    expect(accepted.status).toBe(202);
    await projected();
    expect(await getProduct(touched.updatedProduct)).toEqual(reconciled);
    const logged = (await api(daemon.url, `/api/v1/events/${accepted.json.position}`)).json;
    expect(logged).toMatchObject({
      event_id: stale.data.id,
      source: 'webhook',
      occurred_at: stale.data.attributes.created_at,
    });
    await expectInSync();
  });
});

it('replay after reconcile reproduces the same read model, and verify finds no drift', async () => {
  const before = await mirrorOf(daemon.url);
  const menuBefore = await api(daemon.url, `/api/v1/menu?owner_id=${OWNER}`);
  for (const command of ['replay', 'verify']) {
    const result = await cli([command]);
    expect({ command, code: result.code, run: result.code === 0 ? '' : describeRun(result) }).toEqual({
      command,
      code: 0,
      run: '',
    });
  }
  expect(await mirrorOf(daemon.url)).toEqual(before);
  const menuAfter = await api(daemon.url, `/api/v1/menu?owner_id=${OWNER}`);
  expect(menuAfter.headers.get('etag')).toBe(menuBefore.headers.get('etag'));
  expect(menuAfter.json).toEqual(menuBefore.json);
  await expectInSync();
});

describe('an upstream answering 500 or garbage to the snapshot', () => {
  const DOCUMENTS = ['collection', 'product', 'trait', 'trait_option', 'order'];
  let mirrorBefore: Record<string, Record<string, Compared>>;
  let destroyedOption: string;

  beforeAll(async () => {
    // A destroy reconcile would make from a good snapshot.
    destroyedOption = ids((await emulatorState()).trait_options).find((id) => id !== touched.orderedOption)!;
    await whileDeliveriesFail(() => change('DELETE', `/_emulator/trait_options/${destroyedOption}`));
    mirrorBefore = await mirrorOf(daemon.url);
  });

  afterEach(async () => {
    await setFaults({});
  });

  it.each([
    ['500', { api_failures: 1_000_000, api_error_status: 500 }, /answered 500/],
    ['garbage', { api_garbage: true }, /not a JSON:API document/],
  ])(
    '%s: reconcile exits 1, the report names every failed document, nothing is destroyed, the daemon stays healthy',
    async (_, faults, reason) => {
      const headBefore = await head();
      await setFaults(faults);
      const run = await reconcile(1);
      expect(run.outcome).toBe('failed');
      const [store] = run.stores;
      expect(store).toMatchObject({
        store_id: STORE,
        differences: { created: {}, updated: {}, destroyed: {} },
        events_appended: 0,
      });
      expect(store.errors).toHaveLength(DOCUMENTS.length);
      DOCUMENTS.forEach((document, index) => {
        expect(store.errors[index]).toMatch(new RegExp(`^${document} snapshot: `));
        expect(store.errors[index]).toMatch(reason);
      });
      // Absent from a failed snapshot is not destroyed upstream.
      expect(store.notes).toEqual(
        ['collection', 'product', 'trait', 'trait_option'].map((type) =>
          expect.stringMatching(new RegExp(`^${type}: the snapshot is incomplete`)),
        ),
      );

      expect(await head()).toBe(headBefore);
      expect(await mirrorOf(daemon.url)).toEqual(mirrorBefore);
      expect((await api(daemon.url, `/api/v1/trait_options/${destroyedOption}`)).status).toBe(200);
      expect((await api(daemon.url, '/health/ready', null)).status).toBe(200);
      expect((await api(daemon.url, '/api/v1/reconcile/runs')).json.data[0]).toEqual(run);
    },
    60_000,
  );

  it('once the upstream answers again, reconcile is ok and makes the destroy', async () => {
    const run = await reconcile();
    expect(run.outcome).toBe('ok');
    expect(run.stores[0]).toMatchObject({
      differences: { created: {}, updated: { trait: 1 }, destroyed: { trait_option: 1 } },
      events_appended: 2,
      errors: [],
    });
    await expectInSync();
    expect((await api(daemon.url, `/api/v1/trait_options/${destroyedOption}`)).status).toBe(410);
  });

  it("a store's duration_ms covers its snapshot fetch and the retries of it", async () => {
    // Two 429s with Retry-After: 1 s: the fetch waits at least 2 s before its answers.
    await setFaults({ api_failures: 2, api_error_status: 429 });
    const run = await reconcile();
    expect(run.outcome).toBe('ok');
    expect(run.stores).toHaveLength(1);
    expect(run.stores[0]).toMatchObject({ store_id: STORE, events_appended: 0, errors: [] });
    expect(run.stores[0].duration_ms).toBeGreaterThanOrEqual(2000);
    expect(Date.parse(run.finished_at) - Date.parse(run.started_at)).toBeGreaterThanOrEqual(run.stores[0].duration_ms);
  });
});

describe('an implausible snapshot', () => {
  let destroyEvents: Json[];

  it('most products missing upstream: nothing is destroyed, and the report says why', async () => {
    const products = ids((await emulatorState()).products).filter((id) => id !== touched.orderedProduct);
    expect(products.length + 1).toBe(30);
    const gone = products.slice(0, 20);
    const events = await whileDeliveriesFail(async () => {
      for (const id of gone) await change('DELETE', `/_emulator/products/${id}`);
    });
    destroyEvents = events.filter((event) => event.event_type === 'product.destroyed');
    expect(destroyEvents).toHaveLength(20);

    const run = await reconcile();
    expect(run.outcome).toBe('ok');
    const [store] = run.stores;
    expect(store.differences.destroyed).toEqual({});
    expect(store.notes).toEqual([
      expect.stringMatching(/^product: implausible snapshot: it lacks 20 of 30 mirrored resources; nothing destroyed$/),
    ]);
    await projected();
    const mirror = await mirrorOf(daemon.url, ['products']);
    expect(Object.keys(mirror.products)).toHaveLength(30);
    for (const id of gone) expect(mirror.products[id]).toBeDefined();
    // What else the snapshot said still counts: the collections lost those products.
    await expectInSync(['collections', 'traits', 'trait_options']);
  });

  it('once the platform delivers those destroys, a small destroy (2 products) passes', async () => {
    for (const event of destroyEvents)
      expect(
        (await control(emulator, 'POST', '/_emulator/deliveries/resend', { event_id: event.event_id })).status,
      ).toBe(202);
    await expectInSync();

    const products = ids((await emulatorState()).products).filter((id) => id !== touched.orderedProduct);
    const gone = products.slice(0, 2);
    await whileDeliveriesFail(async () => {
      for (const id of gone) await change('DELETE', `/_emulator/products/${id}`);
    });
    const run = await reconcile();
    expect(run.stores[0]).toMatchObject({ differences: { destroyed: { product: 2 } }, notes: [], errors: [] });
    await expectInSync();
    for (const id of gone) expect((await api(daemon.url, `/api/v1/products/${id}`)).status).toBe(410);
  });
});

describe("stores: a --store filter, another owner's store in STORE_IDS, an owner with two stores", () => {
  const WHY = "menu resources carry no store, so absence from one store's snapshot proves nothing";
  let doomed: string;

  it('a run limited by --store destroys nothing, and says why; creates and updates still apply', async () => {
    doomed = ids((await emulatorState()).products).find((id) => id !== touched.orderedProduct)!;
    await whileDeliveriesFail(() => change('DELETE', `/_emulator/products/${doomed}`));
    const run = await reconcile(0, ['--store', STORE]);
    expect(run).toMatchObject({ outcome: 'ok', errors: [], notes: [] });
    expect(run.stores).toEqual([
      expect.objectContaining({
        store_id: STORE,
        errors: [],
        notes: [`product: destroys skipped: --store given, and ${WHY}; 1 absent resource(s) kept`],
      }),
    ]);
    expect(run.stores[0].differences.destroyed).toEqual({});
    await projected();
    expect((await api(daemon.url, `/api/v1/products/${doomed}`)).status).toBe(200);
    // The destroy also took the product out of its collections: that update is made.
    await expectInSync(['collections', 'traits', 'trait_options']);
  });

  it("another owner's store in STORE_IDS answers 404: left out with a note, the run is ok, and the destroy passes; alone, it fails the run", async () => {
    const elsewhere = (
      await change('POST', '/_emulator/stores', { attributes: { title: 'Elsewhere' }, owner_id: '4002' })
    ).id;
    const run = await reconcile(0, [], { STORE_IDS: `${STORE},${elsewhere}` });
    expect(run).toMatchObject({
      outcome: 'ok',
      errors: [],
      notes: [`connection 1: store ${elsewhere} answered 404: not this connection's store, left out`],
    });
    expect(run.stores).toEqual([
      expect.objectContaining({
        store_id: STORE,
        differences: { created: {}, updated: {}, destroyed: { product: 1 } },
        events_appended: 1,
        errors: [],
        notes: [],
      }),
    ]);
    await expectInSync(MENU_LISTS);
    expect((await api(daemon.url, `/api/v1/products/${doomed}`)).status).toBe(410);

    const alone = await reconcile(1, ['--store', elsewhere]);
    expect(alone).toMatchObject({
      outcome: 'failed',
      stores: [],
      errors: [`store ${elsewhere}: no connection's owner has it`],
      notes: [`connection 1: store ${elsewhere} answered 404: not this connection's store, left out`],
    });
  });

  it('an owner with two stores: both are compared, creates apply, destroys are skipped and the report says why', async () => {
    const second = (await change('POST', '/_emulator/stores', { attributes: { title: 'The Second Kitchen' } })).id;
    const gone = ids((await emulatorState()).products).find((id) => id !== touched.orderedProduct)!;
    let created = '';
    await whileDeliveriesFail(async () => {
      created = (
        await change('POST', '/_emulator/products', {
          store_id: second,
          attributes: { title: 'Second kitchen soup', base_cost: { GBP: 450 } },
        })
      ).id;
      await change('DELETE', `/_emulator/products/${gone}`);
    });
    const run = await reconcile(0, [], { STORE_IDS: `${STORE},${second}` });
    expect(run).toMatchObject({ outcome: 'ok', errors: [], notes: [] });
    expect(run.stores.map((store: Json) => store.store_id)).toEqual([STORE, second]);
    const [first, other] = run.stores;
    expect(first).toMatchObject({ differences: { created: {}, destroyed: {} }, errors: [], notes: [] });
    expect(other).toMatchObject({
      checked: { collection: 0, product: 1, trait: 0, trait_option: 0, order: 0 },
      differences: { created: { product: 1 }, updated: {}, destroyed: {} },
      events_appended: 1,
      errors: [],
      notes: [`product: destroys skipped: the owner has 2 stores, and ${WHY}; 1 absent resource(s) kept`],
    });
    await projected();
    expect((await getProduct(created)).attributes.title).toBe('Second kitchen soup');
    expect((await api(daemon.url, `/api/v1/products/${gone}`)).status).toBe(200);
  });
});

describe('reconcile commands started while a run is in progress', () => {
  let holder: pg.Client;
  const waiting = async (): Promise<number> =>
    (
      await holder.query(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND objsubid = 1 AND NOT granted`,
        [SINGLE_LOCKS.reconcile],
      )
    ).rows[0].n;

  beforeEach(async () => {
    // The test holds the reconcile lock, as a long run in another process would.
    holder = new pg.Client({ connectionString: daemon.database.url });
    await holder.connect();
    await holder.query('SELECT pg_advisory_lock($1::bigint)', [SINGLE_LOCKS.reconcile]);
  });

  afterEach(async () => {
    await holder.end();
  });

  it('wait for it, then run one after another, and all exit 0', async () => {
    const commands = Array.from({ length: 5 }, () => spawnCli(['reconcile'], cliEnv(), daemon.process.cwd));
    await eventually(async () => expect(await waiting()).toBe(5), 60_000, 100);
    const released = Date.now();
    await holder.query('SELECT pg_advisory_unlock($1::bigint)', [SINGLE_LOCKS.reconcile]);
    const results = await Promise.all(commands.map((command) => command.wait(120_000)));
    expect(results.map((result) => (result.code === 0 ? 0 : describeRun(result)))).toEqual([0, 0, 0, 0, 0]);
    const runs = results.map(printedRun);
    expect(runs.map((run) => [run.outcome, run.errors])).toEqual(runs.map(() => ['ok', []]));
    for (const run of runs)
      expect(run.notes).toContainEqual(expect.stringMatching(/^waited \d+(\.\d)? s for the run in progress$/));
    // One at a time: each started after the lock was released, and none while another ran.
    const spans = runs
      .map((run) => [Date.parse(run.started_at), Date.parse(run.finished_at)])
      .sort(([a], [b]) => a - b);
    expect(spans[0][0]).toBeGreaterThanOrEqual(released - 1000);
    for (let i = 1; i < spans.length; i++) expect(spans[i][0]).toBeGreaterThanOrEqual(spans[i - 1][1]);
  }, 240_000);

  it('past --wait, give up with exit 1, a report saying why, and a message', async () => {
    const result = await cli(['reconcile', '--wait', '1']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'menu-sync reconcile: another reconcile run was still in progress after 1 s; nothing done (wait longer with --wait SECONDS)',
    );
    const run = printedRun(result);
    expect(run).toMatchObject({
      outcome: 'skipped',
      stores: [],
      errors: ['another reconcile run was still in progress after 1 s of waiting'],
    });
    expect(Date.parse(run.finished_at) - Date.parse(run.started_at)).toBeGreaterThanOrEqual(1000);
  }, 120_000);
});

describe('a connection whose grant the platform revoked', () => {
  it('is skipped and named in the report, after one refresh attempt, with nothing appended', async () => {
    expect(issued).toHaveLength(1);
    // Someone else spends the daemon's refresh token: the daemon's refresh then reuses a rotated
    // token, and the platform revokes the whole grant (invalid_grant).
    const spent = await postToken(emulator, {
      grant_type: 'refresh_token',
      refresh_token: issued[0].refresh_token!,
      ...clientOf(emulator),
    });
    expect(spent.status).toBe(200);
    expect((await call(emulator, '/_emulator/tokens/expire', { method: 'POST' })).status).toBe(200);
    const grantsBefore = (await call(emulator, '/_emulator/token_requests')).json.data.length;
    const headBefore = await head();

    const run = await reconcile(1);
    expect(run).toMatchObject({
      outcome: 'failed',
      stores: [],
      errors: ['connection 1: reauthorization required, skipped'],
    });
    expect(await head()).toBe(headBefore);
    const grants = (await call(emulator, '/_emulator/token_requests')).json.data.slice(grantsBefore);
    expect(grants.map((grant: Json) => [grant.grant_type, grant.status])).toEqual([['refresh_token', 400]]);
    const [connection] = (await api(daemon.url, '/api/v1/connections')).json.data;
    expect(connection.state).toBe('reauthorization_required');
    expect((await api(daemon.url, '/health/ready', null)).status).toBe(200);
  });
});

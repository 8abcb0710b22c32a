import { SPEC_EVENT_NAMES } from '../../src/domain/event-names.js';
import type { RunningEmulator } from '../../src/emulator/emulator.factory.js';
import type { EmulatorOptions } from '../../src/emulator/emulator-options.js';
import type { Faults } from '../../src/emulator/fault-settings.js';
import { DeliveryService } from '../../src/emulator/delivery/delivery.service.js';
import { bootEmulator, call, control, obtainTokens } from './emulator-client.js';
import type { Reply } from './emulator-client.js';

type Json = any;

const API_TYPE = /^application\/vnd\.api\+json/;

let emulator: RunningEmulator;
let running: RunningEmulator[] = [];

async function boot(overrides: Partial<EmulatorOptions> = {}): Promise<void> {
  emulator = await bootEmulator({ demoData: true, ...overrides });
  running.push(emulator);
}

afterEach(async () => {
  const closing = running;
  running = [];
  for (const instance of closing) await instance.close();
});

async function state(): Promise<Json> {
  const reply = await control(emulator, 'GET', '/_emulator/state');
  expect(reply.status).toBe(200);
  return reply.json;
}

/** Every event produced so far, oldest first: `{event_id, event_type, subject, owner_id, created_at}`. */
async function events(): Promise<Json[]> {
  const reply = await control(emulator, 'GET', '/_emulator/events');
  expect(reply.status).toBe(200);
  return reply.json.data;
}

/** The events produced while `action` ran, as `type subjectType:subjectId`. */
async function eventsDuring(action: () => Promise<unknown>): Promise<string[]> {
  const before = (await events()).length;
  await action();
  return (await events()).slice(before).map((event) => `${event.event_type} ${event.subject.type}:${event.subject.id}`);
}

async function send(method: string, path: string, body: unknown, status: number): Promise<Json> {
  const reply = await control(emulator, method, `/_emulator/${path}`, body);
  if (reply.status !== status)
    throw new Error(`${method} ${path}: expected ${status}, got ${reply.status} ${reply.text}`);
  return reply.json;
}

function expectProblem(reply: Reply, status: number, field?: string): void {
  expect(reply.status).toBe(status);
  expect(reply.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(reply.json).toEqual({
    type: expect.any(String),
    title: expect.any(String),
    status,
    detail: expect.any(String),
    ...(field === undefined ? {} : { field }),
  });
}

const byTitle = (resources: Json[], title: string): Json => {
  const found = resources.find((resource) => resource.attributes.title === title);
  if (found === undefined) throw new Error(`no resource titled ${title}`);
  return found;
};
const byId = (resources: Json[], id: string): Json | undefined => resources.find((resource) => resource.id === id);
const ids = (relationship: Json): string[] => relationship.data.map((identifier: Json) => identifier.id);
const money = (cents: number, format: string, iso_code: string) => ({ cents, format, currency: { iso_code } });

describe('GET /_emulator/state', () => {
  beforeEach(() => boot());

  it('holds the seeded demo: one store, 4 collections, 30 products, 6 traits, 20 trait options, no orders', async () => {
    const seeded = await state();

    expect(
      Object.fromEntries(
        ['stores', 'collections', 'products', 'traits', 'trait_options', 'orders'].map((key) => [
          key,
          seeded[key].length,
        ]),
      ),
    ).toEqual({ stores: 1, collections: 4, products: 30, traits: 6, trait_options: 20, orders: 0 });
    expect(byTitle(seeded.products, 'Flat white').attributes.base_cost).toEqual({
      GBP: money(340, '£3.40', 'GBP'),
      EUR: money(390, '€3.90', 'EUR'),
    });
    expect(byTitle(seeded.trait_options, 'Small').attributes.cost_adjustment).toEqual({
      GBP: money(-50, '-£0.50', 'GBP'),
      EUR: money(-60, '-€0.60', 'EUR'),
    });
    for (const product of seeded.products)
      expect(Object.keys(product.attributes.base_cost).sort()).toEqual(['EUR', 'GBP']);
    for (const option of seeded.trait_options)
      expect(Object.keys(option.attributes.cost_adjustment).sort()).toEqual(['EUR', 'GBP']);
  });

  it('keeps the demo menu consistent: collections list live products, traits list exactly their options', async () => {
    const seeded = await state();

    const listed = seeded.collections.flatMap((collection: Json) => ids(collection.relationships.products));
    expect(listed.sort()).toEqual(seeded.products.map((product: Json) => product.id).sort());
    for (const trait of seeded.traits) {
      const options = seeded.trait_options.filter((option: Json) => option.relationships.trait.data?.id === trait.id);
      expect(ids(trait.relationships.trait_options)).toEqual(options.map((option: Json) => option.id));
    }
  });
});

describe('menu resources through the control API', () => {
  beforeEach(() => boot());

  const cases = [
    {
      path: 'collections',
      type: 'collection',
      create: { attributes: { title: 'Specials' }, relationships: { products: ['2', '1'] } },
      attributes: { title: 'Specials', description: null },
      relationships: {
        products: {
          data: [
            { id: '2', type: 'product' },
            { id: '1', type: 'product' },
          ],
        },
      },
      patch: { title: 'Weekly specials' },
    },
    {
      path: 'products',
      type: 'product',
      create: {
        attributes: { title: 'Hot dog', base_cost: { GBP: 650 } },
        relationships: { traits: { data: [{ id: '1', type: 'trait' }] } },
      },
      attributes: {
        title: 'Hot dog',
        description: '',
        available: true,
        base_cost: { GBP: money(650, '£6.50', 'GBP') },
      },
      relationships: {
        traits: { data: [{ id: '1', type: 'trait' }] },
        externally_managed_product_override: { data: null },
      },
      patch: { available: false },
    },
    {
      path: 'traits',
      type: 'trait',
      create: { attributes: { title: 'Sauce' } },
      attributes: { title: 'Sauce', description: '', required: false, allow_multiple: false },
      relationships: { trait_options: { data: [] } },
      patch: { required: true },
    },
    {
      path: 'trait_options',
      type: 'trait_option',
      create: { attributes: { title: 'Ketchup', cost_adjustment: { GBP: { cents: 20 } } } },
      attributes: {
        title: 'Ketchup',
        description: null,
        available: true,
        default: false,
        cost_adjustment: { GBP: money(20, '£0.20', 'GBP') },
      },
      relationships: { trait: { data: null } },
      patch: { title: 'Mustard', description: 'Dijon' },
    },
  ];

  it.each(cases)(
    'creates a $type: 201 {id}, the resource in the state with defaults filled in, and its created event',
    async (example) => {
      let id = '';
      const produced = await eventsDuring(async () => {
        const reply = await control(emulator, 'POST', `/_emulator/${example.path}`, example.create);
        expect(reply.status).toBe(201);
        expect(reply.json).toEqual({ id: expect.stringMatching(/^\d+$/) });
        id = reply.json.id;
      });

      expect(byId((await state())[example.path], id)).toEqual({
        id,
        type: example.type,
        attributes: { id: Number(id), ...example.attributes },
        relationships: example.relationships,
      });
      expect(produced).toEqual([`${example.type}.created ${example.type}:${id}`]);
    },
  );

  it.each(cases)('updates a $type: 200, only the given attributes changed, and its updated event', async (example) => {
    const { id } = await send('POST', example.path, example.create, 201);
    const before = byId((await state())[example.path], id);
    let answer: Json;

    const produced = await eventsDuring(async () => {
      answer = await send('PATCH', `${example.path}/${id}`, { attributes: example.patch }, 200);
    });

    const after = { ...before, attributes: { ...before.attributes, ...example.patch } };
    expect(answer).toEqual(after);
    expect(byId((await state())[example.path], id)).toEqual(after);
    expect(produced).toEqual([`${example.type}.updated ${example.type}:${id}`]);
  });

  it.each(cases)(
    'destroys a $type: 204, gone from the state, its destroyed event; a second DELETE is 404',
    async (example) => {
      const { id } = await send('POST', example.path, example.create, 201);

      const produced = await eventsDuring(async () => {
        const reply = await control(emulator, 'DELETE', `/_emulator/${example.path}/${id}`);
        expect(reply.status).toBe(204);
        expect(reply.text).toBe('');
      });

      expect(byId((await state())[example.path], id)).toBeUndefined();
      expect(produced).toEqual([`${example.type}.destroyed ${example.type}:${id}`]);
      expectProblem(await control(emulator, 'DELETE', `/_emulator/${example.path}/${id}`), 404);
      expectProblem(
        await control(emulator, 'PATCH', `/_emulator/${example.path}/${id}`, { attributes: { title: 'Back' } }),
        404,
      );
    },
  );

  it('accepts an empty description, as the defaults have', async () => {
    const answer = await send('PATCH', 'products/1', { attributes: { description: '' } }, 200);

    expect(answer.attributes.description).toBe('');
  });

  it('answers 404 for a path that is not a menu type', async () => {
    expectProblem(await control(emulator, 'POST', '/_emulator/widgets', { attributes: { title: 'x' } }), 404);
  });
});

describe('control API validation', () => {
  beforeEach(() => boot());

  const product = (attributes: Record<string, unknown>, relationships?: unknown) => ({
    attributes: { title: 'Hot dog', base_cost: { GBP: 650 }, ...attributes },
    ...(relationships === undefined ? {} : { relationships }),
  });

  it.each([
    ['an unknown attribute', 'POST', 'products', product({ colour: 'red' }), 'attributes.colour'],
    ['an attribute of the wrong type', 'POST', 'products', product({ available: 'yes' }), 'attributes.available'],
    ['a missing required attribute', 'POST', 'traits', { attributes: { required: true } }, 'attributes.title'],
    ['an id among the attributes', 'PATCH', 'products/1', { attributes: { id: 7 } }, 'attributes.id'],
    ['an empty title', 'PATCH', 'collections/1', { attributes: { title: '' } }, 'attributes.title'],
    ['an unknown relationship id', 'POST', 'products', product({}, { traits: ['999'] }), 'relationships.traits'],
    [
      'an unknown relationship id beside a valid change',
      'PATCH',
      'products/1',
      { attributes: { title: 'Renamed' }, relationships: { traits: ['999'] } },
      'relationships.traits',
    ],
    [
      'a relationship of the wrong type',
      'POST',
      'products',
      product({}, { traits: { data: [{ id: '1', type: 'product' }] } }),
      'relationships.traits',
    ],
    [
      'an unknown relationship name',
      'POST',
      'traits',
      { attributes: { title: 'Sauce' }, relationships: { products: ['1'] } },
      'relationships.products',
    ],
    [
      'the derived trait_options of a trait',
      'POST',
      'traits',
      { attributes: { title: 'Sauce' }, relationships: { trait_options: ['1'] } },
      'relationships.trait_options',
    ],
    [
      'a money map keyed by something else than currency codes',
      'POST',
      'products',
      product({ base_cost: { gbp: 650 } }),
      'attributes.base_cost',
    ],
    [
      'a money map with fractional cents',
      'PATCH',
      'products/1',
      { attributes: { base_cost: { GBP: 6.5 } } },
      'attributes.base_cost',
    ],
    [
      'a money map that is a number',
      'PATCH',
      'trait_options/1',
      { attributes: { cost_adjustment: 50 } },
      'attributes.cost_adjustment',
    ],
    ['an unknown store', 'POST', 'collections', { store_id: '99', attributes: { title: 'Elsewhere' } }, 'store_id'],
  ])('refuses %s with 422 naming the field, changing nothing', async (_name, method, path, body, field) => {
    const before = await state();

    const produced = await eventsDuring(async () =>
      expectProblem(await control(emulator, method, `/_emulator/${path}`, body), 422, field),
    );

    expect(produced).toEqual([]);
    expect(await state()).toEqual(before);
  });

  it('refuses a body that is not a JSON object with 400', async () => {
    expectProblem(await control(emulator, 'POST', '/_emulator/products', ['Hot dog']), 400);
  });
});

describe("bodies in the spec's resource shape (copied from a webhook's included)", () => {
  beforeEach(() => boot());

  /** The subject resource as a `eventType` webhook (made by the trigger) included it, as JSON carries it. */
  async function includedOf(eventType: string, id?: string): Promise<Json> {
    const triggered = await send(
      'POST',
      'trigger',
      { event_type: eventType, ...(id === undefined ? {} : { id }) },
      201,
    );
    const event = emulator.app
      .get(DeliveryService)
      .events()
      .filter((candidate) => candidate.eventType === eventType && candidate.subject.id === triggered.subject.id)
      .at(-1);
    if (event === undefined) throw new Error(`no ${eventType} event`);
    return JSON.parse(
      JSON.stringify(
        event.included.find((resource) => resource.type === event.subject.type && resource.id === event.subject.id),
      ),
    );
  }

  it.each([
    ['collections', 'collection'],
    ['products', 'product'],
    ['traits', 'trait'],
    ['trait_options', 'trait_option'],
  ])(
    'POST /_emulator/%s takes the included subject of a %s.created webhook as it is: a new resource with its attributes and relationships',
    async (path, type) => {
      const copied = await includedOf(`${type}.created`);

      const { id } = await send('POST', path, copied, 201);

      expect(id).not.toBe(copied.id);
      const created = byId((await state())[path], id);
      const { id: _id, ...attributes } = copied.attributes;
      expect(created).toMatchObject({ id, type, attributes: { ...attributes, id: Number(id) } });
      // Derived relationships are the platform's (a new trait has no options yet); the others are taken.
      expect(created.relationships).toEqual(
        type === 'trait' ? { ...copied.relationships, trait_options: { data: [] } } : copied.relationships,
      );
    },
  );

  it("takes the spec's own envelope for a trait: relationships.trait_options {data: []}", async () => {
    const { id } = await send(
      'POST',
      'traits',
      { attributes: { title: 'Sauce' }, relationships: { trait_options: { data: [] } } },
      201,
    );
    expect(byId((await state()).traits, id).attributes.title).toBe('Sauce');
  });

  it("PATCH takes a trait's own included body (trait_options consistent), and refuses an inconsistent one", async () => {
    const trait = (await state()).traits.find(
      (candidate: Json) => ids(candidate.relationships.trait_options).length > 1,
    );
    const copied = await includedOf('trait.updated', trait.id);
    expect(ids(copied.relationships.trait_options)).toEqual(ids(trait.relationships.trait_options));

    await send(
      'PATCH',
      `traits/${trait.id}`,
      { ...copied, attributes: { ...copied.attributes, title: 'Renamed' } },
      200,
    );
    expect(byId((await state()).traits, trait.id)).toMatchObject({
      attributes: { title: 'Renamed' },
      relationships: trait.relationships,
    });

    const fewer = {
      ...copied,
      relationships: { trait_options: { data: copied.relationships.trait_options.data.slice(1) } },
    };
    expectProblem(
      await control(emulator, 'PATCH', `/_emulator/traits/${trait.id}`, fewer),
      422,
      'relationships.trait_options',
    );
    expectProblem(
      await control(emulator, 'PATCH', `/_emulator/traits/${trait.id}`, { ...copied, id: '999' }),
      422,
      'id',
    );
    expectProblem(await control(emulator, 'POST', '/_emulator/traits', { ...copied, type: 'product' }), 422, 'type');
  });
});

describe('knock-on consistency', () => {
  beforeEach(() => boot());

  it("adds a new trait option to its trait's trait_options, with trait.updated", async () => {
    const size = byTitle((await state()).traits, 'Size');
    let id = '';

    const produced = await eventsDuring(async () => {
      id = (
        await send('POST', 'trait_options', { attributes: { title: 'Huge' }, relationships: { trait: size.id } }, 201)
      ).id;
    });

    expect(produced).toEqual([`trait_option.created trait_option:${id}`, `trait.updated trait:${size.id}`]);
    expect(ids(byId((await state()).traits, size.id).relationships.trait_options)).toEqual([
      ...ids(size.relationships.trait_options),
      id,
    ]);
  });

  it('moves a trait option between traits, updating both', async () => {
    const { traits } = await state();
    const [size, milk] = [byTitle(traits, 'Size'), byTitle(traits, 'Milk')];
    const moved = ids(size.relationships.trait_options)[0];

    const produced = await eventsDuring(() =>
      send(
        'PATCH',
        `trait_options/${moved}`,
        { relationships: { trait: { data: { id: milk.id, type: 'trait' } } } },
        200,
      ),
    );

    expect(produced).toEqual([
      `trait_option.updated trait_option:${moved}`,
      `trait.updated trait:${size.id}`,
      `trait.updated trait:${milk.id}`,
    ]);
    const after = await state();
    expect(ids(byId(after.traits, size.id).relationships.trait_options)).not.toContain(moved);
    expect(ids(byId(after.traits, milk.id).relationships.trait_options)).toEqual([
      ...ids(milk.relationships.trait_options),
      moved,
    ]);
  });

  it('removes a destroyed product from every collection, each with collection.updated', async () => {
    const { products, collections } = await state();
    const flatWhite = byTitle(products, 'Flat white');
    const drinks = byTitle(collections, 'Drinks');
    const { id: specials } = await send(
      'POST',
      'collections',
      { attributes: { title: 'Specials' }, relationships: { products: [flatWhite.id] } },
      201,
    );

    const produced = await eventsDuring(() => send('DELETE', `products/${flatWhite.id}`, undefined, 204));

    expect(produced).toEqual([
      `product.destroyed product:${flatWhite.id}`,
      `collection.updated collection:${drinks.id}`,
      `collection.updated collection:${specials}`,
    ]);
    const after = await state();
    expect(after.collections.flatMap((collection: Json) => ids(collection.relationships.products))).not.toContain(
      flatWhite.id,
    );
    expect(ids(byId(after.collections, drinks.id).relationships.products)).toEqual(
      ids(drinks.relationships.products).filter((id) => id !== flatWhite.id),
    );
  });

  it("destroys a trait's options with it and removes it from products, each with its event", async () => {
    const before = await state();
    const milk = byTitle(before.traits, 'Milk');
    const options = ids(milk.relationships.trait_options);
    const users = before.products
      .filter((product: Json) => ids(product.relationships.traits).includes(milk.id))
      .map((product: Json) => product.id);
    expect([options.length, users.length]).toEqual([4, 7]);

    const produced = await eventsDuring(() => send('DELETE', `traits/${milk.id}`, undefined, 204));

    expect(produced).toEqual([
      ...options.map((id) => `trait_option.destroyed trait_option:${id}`),
      `trait.destroyed trait:${milk.id}`,
      ...users.map((id: string) => `product.updated product:${id}`),
    ]);
    const after = await state();
    expect(byId(after.traits, milk.id)).toBeUndefined();
    expect(after.trait_options.filter((option: Json) => options.includes(option.id))).toEqual([]);
    expect(after.products.filter((product: Json) => ids(product.relationships.traits).includes(milk.id))).toEqual([]);
  });

  it('drops a destroyed trait option from its trait', async () => {
    const size = byTitle((await state()).traits, 'Size');
    const [first, ...rest] = ids(size.relationships.trait_options);

    const produced = await eventsDuring(() => send('DELETE', `trait_options/${first}`, undefined, 204));

    expect(produced).toEqual([`trait_option.destroyed trait_option:${first}`, `trait.updated trait:${size.id}`]);
    expect(ids(byId((await state()).traits, size.id).relationships.trait_options)).toEqual(rest);
  });
});

describe('orders through the control API', () => {
  beforeEach(() => boot());

  /** Flat white ×2 with Oat and Large, and Fries ×1 with Small: known demo prices in GBP. */
  async function demoOrder(): Promise<Json> {
    const { products, trait_options: options } = await state();
    const option = (trait: Json, title: string) =>
      options.find((entry: Json) => entry.attributes.title === title && entry.relationships.trait.data.id === trait)!
        .id;
    const { traits } = await state();
    const [size, milk] = [byTitle(traits, 'Size').id, byTitle(traits, 'Milk').id];
    return {
      store_id: '1',
      attributes: { note: 'By the window' },
      order_products: [
        {
          product_id: byTitle(products, 'Flat white').id,
          quantity: 2,
          trait_option_ids: [option(milk, 'Oat'), option(size, 'Large')],
        },
        {
          product_id: byTitle(products, 'Fries').id,
          quantity: 1,
          trait_option_ids: [option(size, 'Small')],
          note: 'Crispy',
        },
      ],
    };
  }

  it('prices each line (unit = base + options, total = unit × quantity) and the order, with one pending history entry', async () => {
    let id = '';
    const produced = await eventsDuring(async () => {
      const reply = await control(emulator, 'POST', '/_emulator/orders', await demoOrder());
      expect(reply.status).toBe(201);
      expect(reply.json).toEqual({ id: expect.stringMatching(/^\d+$/) });
      id = reply.json.id;
    });

    const after = await state();
    const order = byId(after.orders, id);
    const lines = ids(order.relationships.order_products).map((lineId) => byId(after.order_products, lineId));
    expect(
      lines.map((line: Json) => [line.attributes.quantity, line.attributes.unit_total, line.attributes.total]),
    ).toEqual([
      [2, 340 + 40 + 70, 900],
      [1, 400 - 50, 350],
    ]);
    // The spec does not say whether an order product's cost is per unit or per line: the emulator shows the line.
    expect(lines.map((line: Json) => line.attributes.cost)).toEqual([
      money(900, '£9.00', 'GBP'),
      money(350, '£3.50', 'GBP'),
    ]);
    expect(lines[1].attributes.note).toBe('Crispy');
    const optionRows = lines
      .flatMap((line: Json) => ids(line.relationships.order_product_trait_options))
      .map((rowId: string) => byId(after.order_product_trait_options, rowId));
    expect(optionRows.map((row: Json) => row.attributes.cost.cents)).toEqual([40, 70, -50]);
    expect(order.attributes).toMatchObject({
      status: 'pending',
      note: 'By the window',
      subtotal: money(1250, '£12.50', 'GBP'),
      total: money(1250, '£12.50', 'GBP'),
      delivery_method: { type: 'eat_in', table: '12' },
    });
    expect(order.attributes.history).toEqual([
      {
        status: 'pending',
        most_recent: true,
        transitioned_at: order.attributes.created_at,
        transitioned_at_human: expect.any(String),
      },
    ]);
    expect(order.relationships.store).toEqual({ data: { id: '1', type: 'store' } });
    expect(produced).toEqual([`order.created order:${id}`]);
  });

  it('adds a most recent history entry for each status change, the older ones no longer most recent', async () => {
    const { id } = await send('POST', 'orders', await demoOrder(), 201);

    const produced = await eventsDuring(async () => {
      const answer = await send('PATCH', `orders/${id}`, { attributes: { status: 'accepted' } }, 200);
      expect(answer.attributes.status).toBe('accepted');
      await send('PATCH', `orders/${id}`, { attributes: { status: 'ready' } }, 200);
    });

    const order = byId((await state()).orders, id);
    expect(order.attributes.status).toBe('ready');
    expect(order.attributes.history.map((entry: Json) => [entry.status, entry.most_recent])).toEqual([
      ['pending', false],
      ['accepted', false],
      ['ready', true],
    ]);
    expect(produced).toEqual([`order.updated order:${id}`, `order.updated order:${id}`]);
    expectProblem(await control(emulator, 'PATCH', '/_emulator/orders/999', { attributes: { status: 'ready' } }), 404);
  });

  it.each([
    [
      'a product that is not live',
      (order: Json) => ({ ...order, order_products: [{ product_id: '999', quantity: 1 }] }),
      'order_products[0].product_id',
    ],
    [
      "an option not of the product's traits",
      (order: Json) => ({
        ...order,
        order_products: [
          { ...order.order_products[1], trait_option_ids: order.order_products[0].trait_option_ids.slice(0, 1) },
        ],
      }),
      'order_products[0].trait_option_ids',
    ],
    [
      'a quantity of zero',
      (order: Json) => ({ ...order, order_products: [{ ...order.order_products[0], quantity: 0 }] }),
      'order_products[0].quantity',
    ],
    ['no lines', (order: Json) => ({ ...order, order_products: [] }), 'order_products'],
    ['an unknown store', (order: Json) => ({ ...order, store_id: '99' }), 'store_id'],
    [
      'an attribute an order is not placed with',
      (order: Json) => ({ ...order, attributes: { status: 'accepted' } }),
      'attributes.status',
    ],
  ])('refuses %s with 422 naming the field', async (_name, spoil, field) => {
    const body = spoil(await demoOrder());

    const produced = await eventsDuring(async () =>
      expectProblem(await control(emulator, 'POST', '/_emulator/orders', body), 422, field),
    );

    expect(produced).toEqual([]);
    expect((await state()).orders).toEqual([]);
  });
});

describe('POST /_emulator/trigger', () => {
  beforeEach(() => boot());

  it('produces each of the 14 events', async () => {
    for (const eventType of SPEC_EVENT_NAMES) {
      const reply = await control(emulator, 'POST', '/_emulator/trigger', { event_type: eventType });
      expect(reply.status).toBe(201);
      const produced = (await events()).filter((event) => reply.json.event_ids.includes(event.event_id));
      expect({ eventType, produced: produced.map((event) => event.event_type) }).toEqual({
        eventType,
        produced: expect.arrayContaining([eventType]),
      });
      expect(produced.find((event) => event.event_type === eventType).subject).toEqual(reply.json.subject);
    }
  });

  it('changes the named resource when given an id', async () => {
    const reply = await control(emulator, 'POST', '/_emulator/trigger', { event_type: 'product.destroyed', id: '3' });

    expect(reply.status).toBe(201);
    expect(reply.json.subject).toEqual({ type: 'product', id: '3' });
    expect(byId((await state()).products, '3')).toBeUndefined();
  });

  it('refuses an event name outside the spec with 422', async () => {
    expectProblem(
      await control(emulator, 'POST', '/_emulator/trigger', { event_type: 'store.updated' }),
      422,
      'event_type',
    );
  });
});

describe('stores through the control API', () => {
  beforeEach(() => boot());

  it('creates and patches a store without producing events (the spec has none for stores)', async () => {
    let id = '';
    const produced = await eventsDuring(async () => {
      id = (await send('POST', 'stores', { attributes: { title: 'Second Kitchen', brand_color: '#112233' } }, 201)).id;
      const before = byId((await state()).stores, id);
      expect(before.attributes).toMatchObject({
        id: Number(id),
        title: 'Second Kitchen',
        brand_color: '#112233',
        status: 'open',
      });
      const answer = await send(
        'PATCH',
        `stores/${id}`,
        { attributes: { status: 'closed', 'accepting_orders?': false } },
        200,
      );
      expect(answer).toEqual({
        ...before,
        attributes: { ...before.attributes, status: 'closed', 'accepting_orders?': false },
      });
    });

    expect(produced).toEqual([]);
    expect((await state()).stores.map((store: Json) => store.id)).toEqual(['1', id]);
  });

  it('refuses to delete a store in use (409), deletes an unused one (204), then 404', async () => {
    const { id } = await send('POST', 'stores', { attributes: { title: 'Pop-up' } }, 201);

    expectProblem(await control(emulator, 'DELETE', '/_emulator/stores/1'), 409);
    expect((await control(emulator, 'DELETE', `/_emulator/stores/${id}`)).status).toBe(204);
    expectProblem(await control(emulator, 'DELETE', `/_emulator/stores/${id}`), 404);
    expect((await state()).stores.map((store: Json) => store.id)).toEqual(['1']);
  });

  it('refuses unknown store attributes and a bad owner with 422', async () => {
    expectProblem(
      await control(emulator, 'POST', '/_emulator/stores', { attributes: { title: 'x', colour: 'red' } }),
      422,
      'attributes.colour',
    );
    expectProblem(await control(emulator, 'POST', '/_emulator/stores', { attributes: {} }), 422, 'attributes.title');
    expectProblem(
      await control(emulator, 'POST', '/_emulator/stores', { attributes: { title: 'x' }, owner_id: 'someone' }),
      422,
      'owner_id',
    );
    expectProblem(await control(emulator, 'PATCH', '/_emulator/stores/1', { owner_id: '4242' }), 422, 'owner_id');
  });

  it('refuses store attributes of a type the spec does not give them, accepting null where it is allowed', async () => {
    const before = await state();

    expectProblem(
      await control(emulator, 'PATCH', '/_emulator/stores/1', { attributes: { latitude: 'north' } }),
      422,
      'attributes.latitude',
    );
    expectProblem(
      await control(emulator, 'PATCH', '/_emulator/stores/1', { attributes: { demo: 'yes' } }),
      422,
      'attributes.demo',
    );
    expectProblem(
      await control(emulator, 'POST', '/_emulator/stores', { attributes: { title: 'x', due_at_options: {} } }),
      422,
      'attributes.due_at_options',
    );
    expectProblem(
      await control(emulator, 'PATCH', '/_emulator/stores/1', { attributes: { description: null } }),
      422,
      'attributes.description',
    );
    expect(await state()).toEqual(before);

    const answer = await send(
      'PATCH',
      'stores/1',
      { attributes: { geocoded_address: null, distance: 1.5, walking_distance: null } },
      200,
    );
    expect(answer.attributes).toMatchObject({ geocoded_address: null, distance: 1.5, walking_distance: null });
  });
});

describe('the platform API (snapshot and order list)', () => {
  const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
  const get = (path: string, token?: string) => call(emulator, path, token === undefined ? {} : bearer(token));
  const menuToken = async () => (await obtainTokens(emulator, 'read_menu')).access_token;

  function expectApiError(reply: Reply, status: number): void {
    expect(reply.status).toBe(status);
    expect(reply.headers.get('content-type')).toMatch(API_TYPE);
    expect(reply.json).toEqual({ errors: [expect.objectContaining({ status: String(status) })] });
  }

  async function setFaults(faults: Partial<Faults>): Promise<void> {
    expect((await control(emulator, 'POST', '/_emulator/faults', faults)).status).toBe(200);
  }

  describe('with the default page size', () => {
    beforeEach(() => boot());

    it('needs a token that grants read_menu: 401 without one, 403 with read_orders only', async () => {
      expectApiError(await get('/stores/1/products'), 401);
      expectApiError(await get('/stores/1/products', 'not-a-token'), 401);
      expectApiError(await get('/stores/1/products', (await obtainTokens(emulator, 'read_orders')).access_token), 403);

      const reply = await get('/stores/1/products', await menuToken());
      expect(reply.status).toBe(200);
      expect(reply.headers.get('content-type')).toMatch(API_TYPE);
      expect(reply.json.data).toHaveLength(30);
      expect(reply.json.links.next).toBeNull();
    });

    it('answers every menu type of the store', async () => {
      const token = await menuToken();
      const seeded = await state();

      for (const path of ['collections', 'products', 'traits', 'trait_options']) {
        expect((await get(`/stores/1/${path}`, token)).json.data).toEqual(seeded[path]);
      }
    });

    it("answers 404 for another owner's store, an unknown store and an unknown resource path", async () => {
      const token = await menuToken();
      const { id } = await send('POST', 'stores', { attributes: { title: 'Not yours' }, owner_id: '4242' }, 201);

      expectApiError(await get(`/stores/${id}/products`, token), 404);
      expectApiError(await get(`/stores/${id}/orders`, (await obtainTokens(emulator)).access_token), 404);
      expectApiError(await get('/stores/999/products', token), 404);
      expectApiError(await get('/stores/1/widgets', token), 404);
    });

    it('pages with page[size] and refuses a bad page parameter with 400', async () => {
      const token = await menuToken();

      const first = await get('/stores/1/products?page[size]=7', token);
      expect(first.json.data.map((product: Json) => product.id)).toEqual(['1', '2', '3', '4', '5', '6', '7']);
      expect(first.json.meta).toEqual({ total_count: 30, page: 1, page_size: 7 });
      const last = await get('/stores/1/products?page%5Bnumber%5D=5&page%5Bsize%5D=7', token);
      expect(last.json.data.map((product: Json) => product.id)).toEqual(['29', '30']);
      expect(last.json.links.next).toBeNull();
      for (const query of ['page[size]=0', 'page[size]=abc', 'page[size]=501', 'page[number]=0', 'page[number]=1.5']) {
        expectApiError(await get(`/stores/1/products?${query}`, token), 400);
      }
    });

    it("lists a store's orders with read_orders: orders in data, related resources in included", async () => {
      const { products } = await state();
      const { id } = await send(
        'POST',
        'orders',
        { store_id: '1', order_products: [{ product_id: byTitle(products, 'Porridge').id, quantity: 1 }] },
        201,
      );
      const token = (await obtainTokens(emulator, 'read_orders')).access_token;

      expectApiError(await get('/stores/1/orders'), 401);
      expectApiError(await get('/stores/1/orders', await menuToken()), 403);
      const reply = await get('/stores/1/orders', token);

      expect(reply.status).toBe(200);
      expect(reply.json.data).toEqual([byId((await state()).orders, id)]);
      expect(reply.json.included.map((resource: Json) => resource.type).sort()).toEqual([
        'order_product',
        'product',
        'store',
        'user',
      ]);
    });

    it('answers injected failures before authentication and counts them down', async () => {
      await setFaults({ api_failures: 2, api_error_status: 500 });

      expectApiError(await get('/stores/1/products'), 500);
      expectApiError(await get('/stores/1/orders'), 500);
      expectApiError(await get('/stores/1/products'), 401);
      expect((await control(emulator, 'GET', '/_emulator/faults')).json.api_failures).toBe(0);
    });

    it('answers an injected 429 with Retry-After, then serves again', async () => {
      const token = await menuToken();
      await setFaults({ api_failures: 1, api_error_status: 429 });

      const limited = await get('/stores/1/products', token);
      expectApiError(limited, 429);
      expect(limited.headers.get('retry-after')).toMatch(/^\d+$/);
      expect((await get('/stores/1/products', token)).status).toBe(200);
    });

    it('answers api_garbage with 200 and a body that is not JSON:API', async () => {
      const token = await menuToken();
      await setFaults({ api_garbage: true });

      const garbage = await get('/stores/1/products', token);
      expect(garbage.status).toBe(200);
      expect(garbage.headers.get('content-type')).not.toMatch(API_TYPE);
      expect(Array.isArray(garbage.json?.data)).toBe(false);

      await setFaults({});
      expect((await get('/stores/1/products', token)).json.data).toHaveLength(30);
    });
  });

  it('follows links.next until null with a page size of 7, each product exactly once', async () => {
    await boot({ pageSize: 7 });
    const token = await menuToken();
    const seen: string[] = [];
    const sizes: number[] = [];

    let next: string | null = `${emulator.url}/stores/1/products`;
    while (next !== null) {
      expect(next.startsWith(emulator.url)).toBe(true);
      const reply: Reply = await get(next.slice(emulator.url.length), token);
      expect(reply.status).toBe(200);
      seen.push(...reply.json.data.map((product: Json) => product.id));
      sizes.push(reply.json.data.length);
      next = reply.json.links.next;
    }

    expect(sizes).toEqual([7, 7, 7, 7, 2]);
    expect(seen).toEqual((await state()).products.map((product: Json) => product.id));
    expect(new Set(seen).size).toBe(30);
  });
});

import { SPEC_EVENT_NAMES } from '../src/domain/event-names.js';
import type { RunningEmulator } from '../src/emulator/emulator.factory.js';
import { seededUnit } from '../src/emulator/seeded-random.js';
import { call, control, obtainTokens, bootEmulator, Reply } from './emulator/emulator-client.js';
import { eventually } from './support/eventually.js';
import { api, RunningDaemon, startDaemon, WEBHOOK_KEY } from './support/http.js';
import type { Json } from './support/menu-events.js';
import { expectMirrorEquals } from './support/mirror.js';

/**
 * The whole flow of issue 5: the emulator, with duplicate deliveries and reordering switched on,
 * drives a few hundred menu and order changes into a running menu-sync (its webhook key set by
 * hand, the endpoint registered through the emulator's real API), and the query API ends equal to
 * the emulator's own state.
 */

const CHANGES = 300;

/** The changes are random but repeatable: each choice is drawn from a seed and its position. */
class Chooser {
  private n = 0;
  constructor(private readonly seed: number) {}
  unit(): number {
    return seededUnit(this.seed, 'change', this.n++);
  }
  pick<T>(items: readonly T[]): T | undefined {
    return items.length === 0 ? undefined : items[Math.floor(this.unit() * items.length)];
  }
  some<T>(items: readonly T[], max: number): T[] {
    return items.filter(() => this.unit() < max / Math.max(items.length, 1));
  }
}

describe('emulator → menu-sync, with duplicates and reordering (issue 5)', () => {
  let emulator: RunningEmulator;
  let daemon: RunningDaemon;
  const made: Record<string, number> = {};

  const ok = (reply: Reply, what: string) => {
    if (reply.status >= 300) throw new Error(`${what}: ${reply.status} ${reply.text}`);
    return reply.json;
  };
  const state = async () => ok(await call(emulator, '/_emulator/state'), 'state');

  /** One random change through the control API, chosen among those the current state allows. */
  async function change(choose: Chooser): Promise<void> {
    const now = await state();
    const ids = (list: Json[]) => list.map((resource) => resource.id as string);
    const [products, traits, options, collections, orders] = [
      now.products,
      now.traits,
      now.trait_options,
      now.collections,
      now.orders,
    ].map(ids);
    const roll = choose.unit();
    const price = () => ({ GBP: 100 + Math.floor(choose.unit() * 2000), EUR: 120 + Math.floor(choose.unit() * 2000) });
    const request =
      roll < 0.14
        ? [
            'POST',
            '/_emulator/products',
            {
              attributes: { title: `P${roll}`, base_cost: price() },
              relationships: { traits: choose.some(traits, 2) },
            },
          ]
        : roll < 0.28 && products.length > 0
          ? [
              'PATCH',
              `/_emulator/products/${choose.pick(products)}`,
              choose.unit() < 0.5
                ? { attributes: { available: choose.unit() < 0.5, base_cost: price() } }
                : { relationships: { traits: choose.some(traits, 2) } },
            ]
          : roll < 0.34 && products.length > 5
            ? ['DELETE', `/_emulator/products/${choose.pick(products)}`]
            : roll < 0.4
              ? [
                  'POST',
                  '/_emulator/collections',
                  { attributes: { title: `C${roll}` }, relationships: { products: choose.some(products, 4) } },
                ]
              : roll < 0.48 && collections.length > 0
                ? [
                    'PATCH',
                    `/_emulator/collections/${choose.pick(collections)}`,
                    { attributes: { description: `D${roll}` }, relationships: { products: choose.some(products, 5) } },
                  ]
                : roll < 0.51 && collections.length > 1
                  ? ['DELETE', `/_emulator/collections/${choose.pick(collections)}`]
                  : roll < 0.56
                    ? [
                        'POST',
                        '/_emulator/traits',
                        { attributes: { title: `T${roll}`, required: choose.unit() < 0.5 } },
                      ]
                    : roll < 0.6 && traits.length > 0
                      ? [
                          'PATCH',
                          `/_emulator/traits/${choose.pick(traits)}`,
                          { attributes: { allow_multiple: choose.unit() < 0.5 } },
                        ]
                      : roll < 0.63 && traits.length > 3
                        ? ['DELETE', `/_emulator/traits/${choose.pick(traits)}`]
                        : roll < 0.7 && traits.length > 0
                          ? [
                              'POST',
                              '/_emulator/trait_options',
                              {
                                attributes: { title: `O${roll}`, cost_adjustment: price() },
                                relationships: { trait: choose.pick(traits) },
                              },
                            ]
                          : roll < 0.77 && options.length > 0
                            ? [
                                'PATCH',
                                `/_emulator/trait_options/${choose.pick(options)}`,
                                choose.unit() < 0.7
                                  ? { attributes: { available: choose.unit() < 0.5, cost_adjustment: price() } }
                                  : { relationships: { trait: choose.pick(traits) ?? null } },
                              ]
                            : roll < 0.81 && options.length > 5
                              ? ['DELETE', `/_emulator/trait_options/${choose.pick(options)}`]
                              : roll < 0.92 && products.length > 0
                                ? [
                                    'POST',
                                    '/_emulator/orders',
                                    {
                                      store_id: '1',
                                      order_products: [
                                        {
                                          product_id: choose.pick(products),
                                          quantity: 1 + Math.floor(choose.unit() * 3),
                                        },
                                      ],
                                    },
                                  ]
                                : orders.length > 0
                                  ? [
                                      'PATCH',
                                      `/_emulator/orders/${choose.pick(orders)}`,
                                      {
                                        attributes: {
                                          status: choose.pick(['accepted', 'preparing', 'ready', 'collected']),
                                        },
                                      },
                                    ]
                                  : ['POST', '/_emulator/traits', { attributes: { title: `T${roll}` } }];
    const [method, path, body] = request as [string, string, unknown];
    ok(await control(emulator, method, path, body), `${method} ${path}`);
    const kind = `${method} ${path.split('/')[2]}`;
    made[kind] = (made[kind] ?? 0) + 1;
  }

  beforeAll(async () => {
    [emulator, daemon] = await Promise.all([
      bootEmulator({ demoData: true, retryScheduleMs: [50, 50, 100, 200, 400], deliveryConcurrency: 8, seed: 42 }),
      startDaemon(),
    ]);
  });

  afterAll(async () => {
    await emulator?.close();
    await daemon?.close();
  });

  it('ends with the query API equal to the emulator state', async () => {
    const faults = await control(emulator, 'POST', '/_emulator/faults', { duplicate_rate: 0.3, reorder_window: 10 });
    expect(faults.status).toBe(200);

    const token = await obtainTokens(emulator);
    const events = ok(await call(emulator, '/_emulator/events'), 'events').data as Json[];
    const subscribe = await call(emulator, '/webhook_endpoints', {
      method: 'POST',
      headers: { Accept: 'application/vnd.service.v2', Authorization: `Bearer ${token.access_token}` },
      body: new URLSearchParams([
        ['callback_uri', `${daemon.url}/webhooks/${WEBHOOK_KEY}`],
        ...SPEC_EVENT_NAMES.map((name): [string, string] => ['enabled_events[]', name]),
      ]),
    });
    expect(subscribe.status).toBe(201);

    // The demo menu was made before anyone subscribed: resending its events brings the mirror up to date.
    for (const event of events)
      expect(
        (await control(emulator, 'POST', '/_emulator/deliveries/resend', { event_id: event.event_id })).status,
      ).toBe(202);
    const choose = new Chooser(20261121);
    for (let i = 0; i < CHANGES; i++) await change(choose);

    const deliveries = await eventually(
      async () => {
        const list = ok(await call(emulator, '/_emulator/deliveries'), 'deliveries');
        expect(list.pending).toBe(0);
        return list.data as Json[];
      },
      60_000,
      100,
    );
    const produced = ok(await call(emulator, '/_emulator/events'), 'events').data.length;
    // Every event was delivered at least once (duplicates and reordering on), none gave up.
    const delivered = new Set(
      deliveries.filter((attempt) => attempt.status >= 200 && attempt.status < 300).map((attempt) => attempt.event_id),
    );
    expect(delivered.size).toBe(produced);
    expect(deliveries.filter((attempt) => attempt.attempt === 1).length).toBeGreaterThan(produced);

    await eventually(async () => {
      const status = await api(daemon.url, '/api/v1/projections');
      expect(status.json.data.map((projection: Json) => projection.lag)).toEqual(status.json.data.map(() => 0));
    }, 30_000);

    await expectMirrorEquals(daemon.url, await state());
    // The drive really exercised every kind of change.
    for (const kind of [
      'POST products',
      'PATCH products',
      'DELETE products',
      'POST collections',
      'DELETE collections',
      'POST traits',
      'DELETE traits',
      'POST trait_options',
      'PATCH trait_options',
      'DELETE trait_options',
      'POST orders',
      'PATCH orders',
    ]) {
      expect({ kind, made: (made[kind] ?? 0) > 0 }).toEqual({ kind, made: true });
    }
  }, 180_000);
});

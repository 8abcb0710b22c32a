import fc from 'fast-check';
import { SPEC_EVENT_NAMES } from './event-names.js';
import { changesOf, fold, ResourceState } from './evolve.js';
import type { ResourceObject, WebhookEvent } from './webhook-event.js';

let position = 0;

function event(
  eventType: WebhookEvent['eventType'],
  id: string,
  at: string,
  attributes: Record<string, unknown> = {},
  extra: { seq?: bigint | null; eventId?: string; included?: ResourceObject[] } = {},
): WebhookEvent {
  const type = eventType.slice(0, eventType.indexOf('.'));
  const subject: ResourceObject = { id, type, attributes: { id: Number(id), ...attributes }, relationships: {} };
  return {
    eventType,
    eventId: extra.eventId ?? `evt-${++position}`,
    seq: extra.seq === undefined ? BigInt(position) : extra.seq,
    occurredAt: new Date(at),
    position,
    ownerId: '42',
    subject: { type, id },
    included: extra.included ?? (eventType.endsWith('.destroyed') ? [] : [subject]),
  } as WebhookEvent;
}

const stateOf = (events: WebhookEvent[], type: string, id: string): ResourceState | undefined =>
  fold(events).get(`${type}\u0000${id}`);

describe('evolve (given events, when folded, then the state)', () => {
  const menuTypes = ['collection', 'product', 'trait', 'trait_option'] as const;

  describe.each(menuTypes)('%s events', (type) => {
    const created = `${type}.created` as WebhookEvent['eventType'];
    const updated = `${type}.updated` as WebhookEvent['eventType'];
    const destroyed = `${type}.destroyed` as WebhookEvent['eventType'];

    it(`given nothing, when ${created}, then the resource exists with its attributes`, () => {
      const state = stateOf([event(created, '1', '2024-01-01T00:00:00Z', { title: 'Tea' })], type, '1');
      expect(state).toMatchObject({
        type,
        id: '1',
        deleted: false,
        ownerId: '42',
        attributes: { id: 1, title: 'Tea' },
      });
    });

    it(`given a ${created}, when a newer ${updated}, then the update wins`, () => {
      const state = stateOf(
        [
          event(created, '1', '2024-01-01T00:00:00Z', { title: 'Tea' }),
          event(updated, '1', '2024-01-02T00:00:00Z', { title: 'Green tea' }),
        ],
        type,
        '1',
      );
      expect(state?.attributes.title).toBe('Green tea');
    });

    it(`given a ${updated}, when an older ${updated} arrives later, then nothing changes`, () => {
      const state = stateOf(
        [
          event(updated, '1', '2024-01-02T00:00:00Z', { title: 'New' }),
          event(updated, '1', '2024-01-01T00:00:00Z', { title: 'Old' }),
        ],
        type,
        '1',
      );
      expect(state?.attributes.title).toBe('New');
    });

    it(`given a ${created}, when a newer ${destroyed}, then it is a tombstone that keeps the last attributes`, () => {
      const state = stateOf(
        [event(created, '1', '2024-01-01T00:00:00Z', { title: 'Tea' }), event(destroyed, '1', '2024-01-02T00:00:00Z')],
        type,
        '1',
      );
      expect(state).toMatchObject({ deleted: true, attributes: { title: 'Tea' } });
    });

    it(`given only a ${destroyed}, then the resource is known as deleted`, () => {
      expect(stateOf([event(destroyed, '9', '2024-01-02T00:00:00Z')], type, '9')).toMatchObject({
        deleted: true,
        attributes: {},
      });
    });

    it(`given a ${destroyed}, when an older ${updated} arrives, then it stays deleted`, () => {
      const state = stateOf(
        [event(destroyed, '1', '2024-01-03T00:00:00Z'), event(updated, '1', '2024-01-02T00:00:00Z', { title: 'Late' })],
        type,
        '1',
      );
      expect(state).toMatchObject({ deleted: true, attributes: { title: 'Late' } });
    });
  });

  it('breaks a tie on occurred_at by attributes.id as an integer, then by data.id bytewise', () => {
    const at = '2024-01-01T00:00:00Z';
    const bySeq = stateOf(
      [
        event('product.updated', '1', at, { title: 'seq 10' }, { seq: 10n }),
        event('product.updated', '1', at, { title: 'seq 9' }, { seq: 9n }),
      ],
      'product',
      '1',
    );
    expect(bySeq?.attributes.title).toBe('seq 10');
    const byId = stateOf(
      [
        event('product.updated', '1', at, { title: 'b' }, { seq: 5n, eventId: 'b' }),
        event('product.updated', '1', at, { title: 'B' }, { seq: 5n, eventId: 'B' }),
      ],
      'product',
      '1',
    );
    expect(byId?.attributes.title).toBe('b');
  });

  it.each(['order.created', 'order.updated'] as const)(
    'given an %s, then the order, order products, their trait options and the store are upserted, not the menu',
    (eventType) => {
      const included: ResourceObject[] = [
        { id: '500', type: 'order', attributes: { status: 'pending' }, relationships: {} },
        { id: '600', type: 'order_product', attributes: { quantity: 2 } },
        { id: '700', type: 'order_product_trait_option', attributes: {} },
        { id: '3', type: 'store', attributes: { title: 'Cafe' } },
        { id: '10', type: 'product', attributes: { title: 'not a menu change' } },
        { id: '20', type: 'trait_option', attributes: {} },
        { id: '42', type: 'user', attributes: {} },
      ];
      const states = fold([event(eventType, '500', '2024-01-01T00:00:00Z', {}, { included })]);
      expect([...states.keys()].map((key) => key.replace('\u0000', ':')).sort()).toEqual([
        'order:500',
        'order_product:600',
        'order_product_trait_option:700',
        'store:3',
      ]);
      expect(states.get('store\u00003')?.attributes.title).toBe('Cafe');
    },
  );

  it('covers every event type of the spec', () => {
    for (const name of SPEC_EVENT_NAMES) {
      const subject = name.startsWith('order.') ? '500' : '1';
      const included = name.startsWith('order.') ? [{ id: '500', type: 'order', attributes: {} }] : undefined;
      expect(changesOf(event(name, subject, '2024-01-01T00:00:00Z', {}, { included })).length).toBeGreaterThan(0);
    }
  });

  it('refuses a created/updated event that does not include its subject', () => {
    expect(() => changesOf(event('trait.updated', '1', '2024-01-01T00:00:00Z', {}, { included: [] }))).toThrow(
      /subject/,
    );
  });
});

describe('fold (property)', () => {
  const names = [
    'product.created',
    'product.updated',
    'product.destroyed',
    'trait.updated',
    'trait.destroyed',
  ] as const;
  const anEvent = fc
    .record({
      name: fc.constantFrom(...names),
      id: fc.constantFrom('1', '2', '3'),
      minute: fc.integer({ min: 0, max: 5 }),
      seq: fc.option(fc.bigInt({ min: 0n, max: 3n }), { nil: null }),
      eventId: fc.string({ minLength: 1, maxLength: 3 }),
      title: fc.string({ maxLength: 4 }),
    })
    .map(({ name, id, minute, seq, eventId, title }) =>
      event(
        name,
        id,
        `2024-01-01T00:0${minute}:00Z`,
        { title },
        { seq, eventId: `${eventId}:${name}:${id}:${minute}:${seq}:${title}` },
      ),
    );

  it('folds any permutation of any set of events, with duplicates, to the same state', () => {
    fc.assert(
      fc.property(
        fc.array(anEvent, { maxLength: 30 }).chain((events) =>
          fc.tuple(
            fc.constant(events),
            fc.shuffledSubarray([...events, ...events], {
              minLength: events.length * 2,
              maxLength: events.length * 2,
            }),
          ),
        ),
        ([events, shuffledWithDuplicates]) => {
          const canonical = fold(events);
          const other = fold(shuffledWithDuplicates);
          expect(new Map([...other].sort())).toEqual(new Map([...canonical].sort()));
        },
      ),
      { numRuns: 500 },
    );
  });
});

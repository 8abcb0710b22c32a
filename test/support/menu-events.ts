import { randomUUID } from 'node:crypto';

/**
 * Spec-shaped webhook events (spec: "Webhook event", "Events", delivery rule 2) built from
 * resource objects, with the event's data.id, created_at, attributes.id and resource owner under
 * the test's control. Resources are plain JSON:API resource objects, so a test can compare what
 * the API answers with exactly what it delivered.
 */

export type Json = any;

export interface Resource {
  id: string;
  type: string;
  attributes: Record<string, unknown>;
  relationships: Record<string, unknown>;
}

export interface EventMeta {
  /** data.attributes.created_at: an ISO 8601 string or a Date. */
  at: string | Date;
  /** The resource owner's user id (data.relationships.resource_owner). */
  ownerId: string;
  /** data.id; a fresh UUID by default. */
  eventId?: string;
  /** data.attributes.id; increasing across every event built here by default. */
  seq?: number;
}

let nextSeq = 1;

const iso = (at: string | Date) => (typeof at === 'string' ? at : at.toISOString());

export const toOne = (type: string, id: string | null) => ({ data: id === null ? null : { id, type } });
export const toMany = (type: string, ids: string[]) => ({ data: ids.map((id) => ({ id, type })) });

/** A currency-keyed money map (base_cost, cost_adjustment). */
export function moneyMap(cents: number, currency = 'GBP'): Record<string, unknown> {
  const symbol = currency === 'GBP' ? '£' : currency === 'EUR' ? '€' : '$';
  return { [currency]: { cents, format: `${symbol}${(cents / 100).toFixed(2)}`, currency: { iso_code: currency } } };
}

export function money(cents: number, currency = 'GBP'): Record<string, unknown> {
  return moneyMap(cents, currency)[currency] as Record<string, unknown>;
}

export function collection(id: string, options: { title?: string; productIds?: string[] } = {}): Resource {
  return {
    id,
    type: 'collection',
    attributes: { id: Number(id), title: options.title ?? `Collection ${id}` },
    relationships: { products: toMany('product', options.productIds ?? []) },
  };
}

export function product(
  id: string,
  options: {
    title?: string;
    description?: string;
    available?: boolean;
    cents?: number;
    traitIds?: string[];
    extra?: Record<string, unknown>;
  } = {},
): Resource {
  return {
    id,
    type: 'product',
    attributes: {
      id: Number(id),
      title: options.title ?? `Product ${id}`,
      description: options.description ?? `The description of product ${id}.`,
      available: options.available ?? true,
      base_cost: moneyMap(options.cents ?? 850),
      ...options.extra,
    },
    relationships: {
      traits: toMany('trait', options.traitIds ?? []),
      externally_managed_product_override: toOne('externally_managed_product_override', null),
    },
  };
}

export function trait(
  id: string,
  options: { title?: string; optionIds?: string[]; required?: boolean; allowMultiple?: boolean } = {},
): Resource {
  return {
    id,
    type: 'trait',
    attributes: {
      id: Number(id),
      title: options.title ?? `Trait ${id}`,
      description: `The description of trait ${id}.`,
      required: options.required ?? false,
      allow_multiple: options.allowMultiple ?? false,
    },
    relationships: { trait_options: toMany('trait_option', options.optionIds ?? []) },
  };
}

export function traitOption(
  id: string,
  options: { title?: string; traitId?: string | null; cents?: number; isDefault?: boolean } = {},
): Resource {
  return {
    id,
    type: 'trait_option',
    attributes: {
      id: Number(id),
      title: options.title ?? `Option ${id}`,
      description: null,
      available: true,
      default: options.isDefault ?? false,
      cost_adjustment: moneyMap(options.cents ?? 50),
    },
    relationships: { trait: toOne('trait', options.traitId ?? null) },
  };
}

export function user(id: string): Resource {
  return { id, type: 'user', attributes: { id: Number(id) || id }, relationships: {} };
}

export function store(id: string, options: { title?: string } = {}): Resource {
  return {
    id,
    type: 'store',
    attributes: {
      id: Number(id),
      title: options.title ?? `Store ${id}`,
      description: 'A small store',
      brand_color: '#336699',
      latitude: 51.5,
      longitude: -0.12,
      opening_times: {
        monday: [['9:00', '17:00']],
        tuesday: [],
        wednesday: [],
        thursday: [],
        friday: [],
        saturday: [],
        sunday: [],
      },
      status: 'open',
      demo: false,
      active: true,
      due_at_options_mode: 'basic',
      created_at: '2024-01-01T00:00:00.000Z',
      is_takeout: true,
      is_restaurant: false,
      geocoded_address: null,
      prevent_orders_being_placed_outside_of_opening_times: false,
      table_is_required_for_eat_in_orders: false,
      'accepting_orders?': true,
      due_at_options: [{ text: 'ASAP', value: 0, type: 'relative' }],
      logo: { x1: 'https://img.example/1.png', x2: 'https://img.example/2.png', x3: 'https://img.example/3.png' },
      distance: null,
      walking_distance: null,
    },
    relationships: {
      photos: toMany('photo', []),
      tables: toMany('table', []),
      loyalty_scheme: toOne('loyalty_scheme', null),
    },
  };
}

export function order(
  id: string,
  options: {
    status?: string;
    orderProductIds: string[];
    storeId: string;
    userId: string;
    note?: string | null;
    createdAt?: string;
  },
): Resource {
  const status = options.status ?? 'pending';
  const createdAt = options.createdAt ?? '2024-05-01T10:00:00.000Z';
  return {
    id,
    type: 'order',
    attributes: {
      id: Number(id),
      note: options.note ?? null,
      due_at: createdAt,
      'for_pickup?': false,
      status,
      created_at: createdAt,
      'order_dependencies_are_present_and_available_for_reorder?': true,
      delivery_method: { type: 'eat_in', table: 'T1' },
      subtotal: money(1200),
      total: money(1200),
      history: [{ transitioned_at_human: 'just now', status, transitioned_at: createdAt, most_recent: true }],
    },
    relationships: {
      order_products: toMany('order_product', options.orderProductIds),
      store: toOne('store', options.storeId),
      user: toOne('user', options.userId),
      table: toOne('table', null),
      feedback: toOne('feedback', null),
    },
  };
}

export function orderProduct(
  id: string,
  options: { productId: string; optionIds?: string[]; quantity?: number },
): Resource {
  const quantity = options.quantity ?? 1;
  return {
    id,
    type: 'order_product',
    attributes: {
      id: Number(id),
      note: null,
      quantity,
      total: 600 * quantity,
      unit_total: 600,
      cost: money(600 * quantity),
    },
    relationships: {
      product: toOne('product', options.productId),
      order_product_trait_options: toMany('order_product_trait_option', options.optionIds ?? []),
    },
  };
}

export function orderProductTraitOption(id: string, options: { traitOptionId: string }): Resource {
  return {
    id,
    type: 'order_product_trait_option',
    attributes: { id: Number(id), cost: money(50) },
    relationships: { trait_option: toOne('trait_option', options.traitOptionId) },
  };
}

function envelope(
  eventType: string,
  subject: { type: string; id: string },
  included: Resource[],
  meta: EventMeta,
): Json {
  return {
    data: {
      id: meta.eventId ?? randomUUID(),
      type: 'webhook_event',
      attributes: {
        id: meta.seq ?? nextSeq++,
        created_at: iso(meta.at),
        event_type: eventType,
        uri: 'https://menu-sync.example/webhooks/key',
      },
      relationships: {
        subject: { data: { id: subject.id, type: subject.type } },
        resource_owner: { data: { id: meta.ownerId, type: 'user' } },
      },
    },
    included,
  };
}

/** `{type}.created` / `{type}.updated` with the resource as the included subject. */
export function menuEvent(kind: 'created' | 'updated', resource: Resource, meta: EventMeta): Json {
  return envelope(`${resource.type}.${kind}`, resource, [resource], meta);
}

/** `{type}.destroyed`: the spec does not show its body; the subject identifier and an empty `included`. */
export function destroyedEvent(type: string, id: string, meta: EventMeta): Json {
  return envelope(`${type}.destroyed`, { type, id }, [], meta);
}

export interface OrderParts {
  user: Resource;
  order: Resource;
  orderProducts: Resource[];
  orderProductTraitOptions?: Resource[];
  traitOptions?: Resource[];
  traits?: Resource[];
  products?: Resource[];
  store: Resource;
}

/** order.created / order.updated: `included` holds everything delivery rule 2 lists. */
export function orderEvent(kind: 'created' | 'updated', parts: OrderParts, meta: EventMeta): Json {
  const included = [
    parts.user,
    parts.order,
    ...parts.orderProducts,
    ...(parts.orderProductTraitOptions ?? []),
    ...(parts.traitOptions ?? []),
    ...(parts.traits ?? []),
    ...(parts.products ?? []),
    parts.store,
  ];
  return envelope(`order.${kind}`, { type: 'order', id: parts.order.id }, included, meta);
}

/** An instant `minutes` after a fixed base, as ISO 8601 with milliseconds. */
export function at(minutes: number, base = '2024-05-01T10:00:00.000Z'): string {
  return new Date(Date.parse(base) + minutes * 60_000).toISOString();
}

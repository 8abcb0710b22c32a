import type { SpecEventName } from './event-names.js';

/** A JSON:API resource identifier. */
export interface ResourceIdentifier {
  id: string;
  type: string;
}

/** A resource object as it appears in `included` (spec: Resources and their fields). */
export interface ResourceObject {
  id: string | number;
  type: string;
  attributes?: Record<string, unknown>;
  relationships?: Record<string, unknown>;
}

type EventNamesOf<Prefix extends string> = Extract<SpecEventName, `${Prefix}.${string}`>;

interface EventBase<Name extends string, Subject extends string> {
  eventType: Name;
  eventId: string;
  /** `data.attributes.id`, the second part of the version; null when absent. */
  seq: bigint | null;
  occurredAt: Date;
  position: number;
  ownerId: string | null;
  subject: { type: Subject; id: string };
  included: ResourceObject[];
}

export type MenuResourceType = 'collection' | 'product' | 'trait' | 'trait_option';
export type OrderResourceType = 'order' | 'order_product' | 'order_product_trait_option' | 'store';
export type ResourceType = MenuResourceType | OrderResourceType;

export const ORDER_TYPES: readonly OrderResourceType[] = [
  'order',
  'order_product',
  'order_product_trait_option',
  'store',
];

export type CollectionEvent = EventBase<EventNamesOf<'collection'>, 'collection'>;
export type ProductEvent = EventBase<EventNamesOf<'product'>, 'product'>;
export type TraitEvent = EventBase<EventNamesOf<'trait'>, 'trait'>;
export type TraitOptionEvent = EventBase<EventNamesOf<'trait_option'>, 'trait_option'>;
export type OrderEvent = EventBase<EventNamesOf<'order'>, 'order'>;

/** The spec's 14 events, discriminated by `eventType`. */
export type WebhookEvent = CollectionEvent | ProductEvent | TraitEvent | TraitOptionEvent | OrderEvent;

/** The 14 event names of the spec's Events part. */
export const SPEC_EVENT_NAMES = [
  'order.created',
  'order.updated',
  'collection.created',
  'collection.updated',
  'collection.destroyed',
  'product.created',
  'product.updated',
  'product.destroyed',
  'trait.created',
  'trait.updated',
  'trait.destroyed',
  'trait_option.created',
  'trait_option.updated',
  'trait_option.destroyed',
] as const;

export type SpecEventName = (typeof SPEC_EVENT_NAMES)[number];

const known = new Set<string>(SPEC_EVENT_NAMES);

export function isSpecEventName(name: string): name is SpecEventName {
  return known.has(name);
}

import type { ResourceType } from './webhook-event.js';

/**
 * The resource types in the one form that names them everywhere a type is chosen (sinks' `types`,
 * the feed's `type`, CHANGES_TYPES): the singular of the spec's `type`, as a change carries it.
 */
export const RESOURCE_TYPE_NAMES: readonly ResourceType[] = [
  'collection',
  'product',
  'trait',
  'trait_option',
  'order',
  'order_product',
  'order_product_trait_option',
  'store',
];

const SINGULAR_OF: ReadonlyMap<string, ResourceType> = new Map(RESOURCE_TYPE_NAMES.map((type) => [`${type}s`, type]));

/**
 * Why `names` is not a list of resource types, or null: a plural (the API's collection name, the
 * name of a table sink's table) is named with the singular to write instead.
 */
export function resourceTypesProblem(names: readonly unknown[], also: readonly string[] = []): string | null {
  const unknown = names.filter(
    (name) => typeof name !== 'string' || !(RESOURCE_TYPE_NAMES as readonly string[]).concat(also).includes(name),
  );
  if (unknown.length === 0) return null;
  const plurals = unknown.filter((name): name is string => typeof name === 'string' && SINGULAR_OF.has(name));
  if (plurals.length === 1) return `${plurals[0]} is a collection name; the type is ${SINGULAR_OF.get(plurals[0])}`;
  if (plurals.length > 1)
    return `${plurals.join(', ')} are collection names; the types are ${plurals.map((name) => SINGULAR_OF.get(name)).join(', ')}`;
  const shown = unknown.map((name) => (typeof name === 'string' ? name : (JSON.stringify(name) ?? String(name))));
  return `${shown.join(', ')} ${shown.length === 1 ? 'is not a resource type' : 'are not resource types'} (${RESOURCE_TYPE_NAMES.concat(also as ResourceType[]).join(', ')})`;
}

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
  const others = unknown.filter((name) => !plurals.includes(name as string));
  const problems: string[] = [];
  if (plurals.length === 1)
    problems.push(`${plurals[0]} is a collection name; the type is ${SINGULAR_OF.get(plurals[0])}`);
  if (plurals.length > 1)
    problems.push(
      `${plurals.join(', ')} are collection names; the types are ${plurals.map((name) => SINGULAR_OF.get(name)).join(', ')}`,
    );
  if (others.length > 0) {
    const shown = others.map((name) => (typeof name === 'string' ? name : (JSON.stringify(name) ?? String(name))));
    const known = RESOURCE_TYPE_NAMES.concat(also as ResourceType[]).join(', ');
    problems.push(
      `${shown.join(', ')} ${shown.length === 1 ? 'is not a resource type' : 'are not resource types'} (${known})`,
    );
  }
  return problems.join('; ');
}

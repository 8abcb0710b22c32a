/** "What changed between two instants": two menus (GET /api/v1/menu) compared resource by resource. */

const LABEL = { collection: 'Collection', product: 'Product', trait: 'Trait', trait_option: 'Option' };

/** Every resource of a menu document by `type id` (traits and options come expanded under products). */
export function flatten(menu) {
  const all = new Map();
  const add = (resource) => all.set(`${resource.type} ${resource.id}`, resource);
  menu.collections.forEach(add);
  for (const product of menu.products) {
    add(product);
    for (const trait of product.traits ?? []) {
      add(trait);
      (trait.trait_options ?? []).forEach(add);
    }
  }
  return all;
}

export const titleOf = (resource) => resource.attributes?.title ?? resource.attributes?.name ?? `#${resource.id}`;

/** A price object of the platform ({GBP:{cents,format}} or {GBP:650}) or any value, as a short text. */
export function show(value) {
  if (value === undefined) return '(none)';
  if (value === null) return 'null';
  if (typeof value === 'object' && !Array.isArray(value)) {
    const entries = Object.entries(value);
    if (entries.length > 0 && entries.every(([key]) => /^[A-Z]{3}$/.test(key))) {
      return entries
        .map(([currency, price]) =>
          typeof price === 'object' && price?.format
            ? price.format
            : typeof price === 'object' && typeof price?.cents === 'number'
              ? `${(price.cents / 100).toFixed(2)} ${currency}`
              : `${price} ${currency}`,
        )
        .join(' · ');
    }
    if (Array.isArray(value.data)) return value.data.map((ref) => `${ref.type} ${ref.id}`).join(', ') || '(none)';
    if ('data' in value) return value.data ? `${value.data.type} ${value.data.id}` : '(none)';
  }
  const text = typeof value === 'string' ? `“${value}”` : JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 77)}…` : text;
}

function fieldChanges(before, after) {
  const changes = [];
  for (const part of ['attributes', 'relationships']) {
    const a = before[part] ?? {};
    const b = after[part] ?? {};
    for (const field of new Set([...Object.keys(a), ...Object.keys(b)])) {
      if (JSON.stringify(a[field]) !== JSON.stringify(b[field]))
        changes.push({ field, before: show(a[field]), after: show(b[field]) });
    }
  }
  return changes;
}

/** {added, removed, changed: [{label, title, changes:[{field,before,after}]}]}, each sorted by type then title. */
export function diffMenus(from, to) {
  const a = flatten(from);
  const b = flatten(to);
  const entry = (resource, extra = {}) => ({
    key: `${resource.type} ${resource.id}`,
    label: LABEL[resource.type] ?? resource.type,
    title: titleOf(resource),
    ...extra,
  });
  const order = (x, y) => x.label.localeCompare(y.label) || x.title.localeCompare(y.title);
  const added = [...b.values()]
    .filter((resource) => !a.has(`${resource.type} ${resource.id}`))
    .map((resource) => entry(resource))
    .sort(order);
  const removed = [...a.values()]
    .filter((resource) => !b.has(`${resource.type} ${resource.id}`))
    .map((resource) => entry(resource))
    .sort(order);
  const changed = [];
  for (const [key, after] of b) {
    const before = a.get(key);
    if (!before) continue;
    const changes = fieldChanges(before, after);
    if (changes.length > 0) changed.push(entry(after, { changes, previousTitle: titleOf(before) }));
  }
  return { added, removed, changed: changed.sort(order) };
}

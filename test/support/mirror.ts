import { api } from './http.js';
import type { Json } from './menu-events.js';

/**
 * The mirror as the query API shows it, next to the emulator's own state (`GET /_emulator/state`):
 * the comparison that says "the query API equals the emulator's state" (docs/reference.md §5, §9).
 */

export const MENU_LISTS = ['collections', 'products', 'traits', 'trait_options'] as const;
export const ORDER_LISTS = ['orders', 'order_products', 'stores'] as const;
export const MIRRORED_LISTS = [...MENU_LISTS, ...ORDER_LISTS] as const;
export type MirroredList = (typeof MIRRORED_LISTS)[number];

/** What is compared of a resource: its owner, attributes and relationships. */
export type Compared = { owner_id: string; attributes: Json; relationships: Json };

/** A mirrored list through the query API, every page: live resources as id → compared content. */
export async function mirrored(daemonUrl: string, name: MirroredList): Promise<Record<string, Compared>> {
  const out: Record<string, Compared> = {};
  let cursor: string | null = null;
  do {
    const page = await api(
      daemonUrl,
      `/api/v1/${name}?limit=1000${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
    );
    if (page.status !== 200) throw new Error(`GET /api/v1/${name} answered ${page.status}: ${page.text}`);
    for (const resource of page.json.data)
      out[resource.id] = {
        owner_id: resource.owner_id,
        attributes: resource.attributes,
        relationships: resource.relationships,
      };
    cursor = page.json.next_cursor;
  } while (cursor !== null);
  return out;
}

/** The same view of one list of the emulator's state document, every resource owned by `ownerId`. */
export function expectedFrom(state: Json, name: MirroredList, ownerId = '4001'): Record<string, Compared> {
  return Object.fromEntries(
    (state[name] as Json[]).map((resource) => [
      resource.id,
      { owner_id: ownerId, attributes: resource.attributes, relationships: resource.relationships ?? {} },
    ]),
  );
}

/** Every given list of the mirror, by name. */
export async function mirrorOf(
  daemonUrl: string,
  names: readonly MirroredList[] = MIRRORED_LISTS,
): Promise<Record<string, Record<string, Compared>>> {
  const out: Record<string, Record<string, Compared>> = {};
  for (const name of names) out[name] = await mirrored(daemonUrl, name);
  return out;
}

/** Expects the query API to show exactly the emulator's state for each list (one expectation per list, named). */
export async function expectMirrorEquals(
  daemonUrl: string,
  state: Json,
  names: readonly MirroredList[] = MIRRORED_LISTS,
): Promise<void> {
  for (const name of names) {
    expect({ name, resources: await mirrored(daemonUrl, name) }).toEqual({
      name,
      resources: expectedFrom(state, name),
    });
  }
}

import { canonicalId } from './canonical-id.js';
import { compareVersions, Version } from './version.js';
import { ORDER_TYPES, ResourceObject, ResourceType, WebhookEvent } from './webhook-event.js';

/** What one event says about one resource. */
export interface ResourceChange {
  type: ResourceType;
  id: string;
  ownerId: string | null;
  version: Version;
  position: number;
  /** null for a destroy. */
  data: { attributes: Record<string, unknown>; relationships: Record<string, unknown> } | null;
}

/**
 * The read-model state of one resource. `version` is its newest event's, which decides `deleted`;
 * the attributes are those of its newest create/update (`dataVersion`), so that a tombstone still
 * shows what was deleted, and both depend only on the set of events.
 */
export interface ResourceState {
  type: ResourceType;
  id: string;
  ownerId: string | null;
  version: Version;
  position: number;
  deleted: boolean;
  attributes: Record<string, unknown>;
  relationships: Record<string, unknown>;
  dataVersion: Version | null;
}

const ORDER_INCLUDED = new Set<string>(ORDER_TYPES);

/**
 * The resource changes an event carries: a menu event changes its subject (from `included`, or a
 * tombstone for `*.destroyed`); an order event upserts the order, its order products, their trait
 * options and the store found in `included` — menu resources inside it change nothing.
 */
export function changesOf(event: WebhookEvent): ResourceChange[] {
  const version: Version = { occurredAt: event.occurredAt, seq: event.seq, eventId: event.eventId };
  const change = (type: ResourceType, id: string, resource: ResourceObject | null): ResourceChange => ({
    type,
    id,
    ownerId: event.ownerId,
    version,
    position: event.position,
    data:
      resource === null ? null : { attributes: resource.attributes ?? {}, relationships: resource.relationships ?? {} },
  });
  if (event.eventType === 'order.created' || event.eventType === 'order.updated') {
    return event.included
      .filter((resource) => ORDER_INCLUDED.has(resource.type) && canonicalId(resource.id) !== undefined)
      .map((resource) => change(resource.type as ResourceType, canonicalId(resource.id)!, resource));
  }
  const { type, id } = event.subject;
  if (event.eventType.endsWith('.destroyed')) return [change(type, id, null)];
  const resource = event.included.find((candidate) => candidate.type === type && canonicalId(candidate.id) === id);
  if (!resource) throw new Error(`${event.eventType} ${event.eventId} does not include its subject ${type} ${id}`);
  return [change(type, id, resource)];
}

/** Applies one change to a resource's state under the version rule. Pure. */
export function evolve(state: ResourceState | undefined, change: ResourceChange): ResourceState {
  const newest = state === undefined || compareVersions(change.version, state.version) > 0;
  const newerData =
    change.data !== null && (state?.dataVersion == null || compareVersions(change.version, state.dataVersion) > 0);
  if (!newest && !newerData) return state!;
  return {
    type: change.type,
    id: change.id,
    ownerId: newest ? change.ownerId : state!.ownerId,
    version: newest ? change.version : state!.version,
    position: newest ? change.position : state!.position,
    deleted: newest ? change.data === null : state!.deleted,
    attributes: newerData ? change.data!.attributes : (state?.attributes ?? {}),
    relationships: newerData ? change.data!.relationships : (state?.relationships ?? {}),
    dataVersion: newerData ? change.version : (state?.dataVersion ?? null),
  };
}

export const resourceKey = (type: string, id: string) => `${type}\u0000${id}`;

/** Folds events into the state of every resource they touch. */
export function fold(
  events: Iterable<WebhookEvent>,
  states = new Map<string, ResourceState>(),
): Map<string, ResourceState> {
  for (const event of events) {
    for (const change of changesOf(event)) {
      const key = resourceKey(change.type, change.id);
      states.set(key, evolve(states.get(key), change));
    }
  }
  return states;
}

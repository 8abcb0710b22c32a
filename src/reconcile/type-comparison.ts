import type { SpecEventName } from '../domain/event-names.js';
import { DeliveryRejection } from '../ingress/webhook-event.parser.js';
import type { NewLogEntry } from '../event-log/log-entry.js';
import { reconcileEntry } from './reconcile-event.factory.js';
import type { DifferenceKind } from './reconcile-report.js';
import { diffSnapshot } from './snapshot-diff.js';
import type { MirrorResource, SnapshotResource, TypeDiff } from './snapshot-diff.js';
import type { FetchedList, SnapshotType, StoreSnapshot } from './snapshot.fetcher.js';

/** What reconcile compares: the four menu types, and orders (never destroyed). */
export type ComparedType = SnapshotType | 'order';

/** Why absence proves nothing unless the whole of the owner's one store was read. */
const NO_STORE_ON_MENU = "menu resources carry no store, so absence from one store's snapshot proves nothing";

export interface ComparisonOptions {
  owner: string;
  runId: string;
  /** Why no absence can be trusted in this run at all (see destroysRefused), if so. */
  refused: string | undefined;
  /** The implausibility guard of diffSnapshot: destroys beyond this share of the live resources … */
  maxDestroyRatio: number;
  /** … and beyond this many are refused. */
  minImplausibleDestroys: number;
}

/** One difference, charged to the store whose snapshot showed it, with the log entry that heals it (none when it cannot be logged). */
export interface Difference {
  kind: DifferenceKind;
  storeId: string;
  entry: NewLogEntry | null;
}

/** A sentence for one store's report. */
export interface StoreRemark {
  storeId: string;
  text: string;
}

/** One type compared over an owner's fetched stores: what its reports and the log receive. */
export interface TypeComparison {
  /** Resources each store listed. */
  checked: Map<string, number>;
  differences: Difference[];
  errors: StoreRemark[];
  notes: StoreRemark[];
}

/**
 * Compares one type of the owner's fetched stores with the owner's mirror (deleted resources
 * included) and turns every difference into the log entry that heals it (docs/reference.md §8). No I/O:
 * the caller reads the mirror, reports and appends. A resource listed by several stores counts for
 * the first; a destroy is charged to the last store. A difference that cannot be logged (an id the
 * log refuses) is still counted, without an entry, and is an error of its store's report, not of the run.
 */
export function compareType(
  type: ComparedType,
  snapshots: StoreSnapshot[],
  mirror: MirrorResource[],
  options: ComparisonOptions,
): TypeComparison {
  const comparison: TypeComparison = { checked: new Map(), differences: [], errors: [], notes: [] };
  const found = new Map<string, { resource: SnapshotResource; snapshot: StoreSnapshot }>();
  for (const snapshot of snapshots) {
    const list = listOf(snapshot, type);
    comparison.checked.set(snapshot.storeId, list.resources.length);
    if (list.error !== undefined) comparison.errors.push({ storeId: snapshot.storeId, text: list.error });
    for (const resource of list.resources) if (!found.has(resource.id)) found.set(resource.id, { resource, snapshot });
  }
  const diff = diffOf(
    type,
    [...found.values()].map(({ resource }) => resource),
    mirror,
    snapshots,
    options,
  );
  const last = snapshots[snapshots.length - 1];
  if (diff.destroysSkipped !== undefined)
    comparison.notes.push({ storeId: last.storeId, text: `${type}: ${diff.destroysSkipped}` });
  // A destroy is dated by the earliest fetch: a webhook created after any of them still wins.
  const earliest = new Date(Math.min(...snapshots.map((snapshot) => snapshot.fetchedAt.getTime())));
  const add = (kind: DifferenceKind, id: string, resource?: SnapshotResource) => {
    const snapshot = found.get(id)?.snapshot ?? last;
    const change = {
      eventType: `${type}.${kind}` as SpecEventName,
      subject: { type, id },
      ownerId: options.owner,
      included: resource === undefined ? [] : [resource, ...(resource.related ?? [])],
    };
    const difference: Difference = { kind, storeId: snapshot.storeId, entry: null };
    comparison.differences.push(difference);
    try {
      difference.entry = reconcileEntry(change, options.runId, resource === undefined ? earliest : snapshot.fetchedAt);
    } catch (error) {
      if (!(error instanceof DeliveryRejection)) throw error;
      comparison.errors.push({
        storeId: snapshot.storeId,
        text: `${type} ${JSON.stringify(id.length > 40 ? `${id.slice(0, 40)}…` : id)} cannot be logged: ${error.message}; skipped`,
      });
    }
  };
  diff.created.forEach((resource) => add('created', resource.id, resource));
  diff.updated.forEach((resource) => add('updated', resource.id, resource));
  diff.destroyed.forEach((id) => add('destroyed', id));
  return comparison;
}

/**
 * Menu resources carry no store, so a resource absent from the snapshots is known to be destroyed
 * only when they cover the owner's whole menu: no --store filter, and the owner has exactly one
 * store (another owner's store answering 403/404 is not counted), whose snapshot is the one
 * compared. A store that is neither in STORE_IDS nor named by an order event stays unknown here:
 * see docs/upstream.md.
 */
export function destroysRefused(storeFilter: string | undefined, ownerStores: number): string | undefined {
  if (storeFilter !== undefined) return `destroys skipped: --store given, and ${NO_STORE_ON_MENU}`;
  if (ownerStores > 1) return `destroys skipped: the owner has ${ownerStores} stores, and ${NO_STORE_ON_MENU}`;
  return undefined;
}

function diffOf(
  type: ComparedType,
  resources: SnapshotResource[],
  mirror: MirrorResource[],
  snapshots: StoreSnapshot[],
  options: ComparisonOptions,
): TypeDiff {
  const guard = { maxRatio: options.maxDestroyRatio, minCount: options.minImplausibleDestroys };
  if (type === 'order') {
    // Orders are never destroyed (the spec has no such event), and an order list may be a window.
    const { created, updated } = diffSnapshot(resources, mirror, { ...guard, complete: false });
    return { created, updated, destroyed: [] };
  }
  return diffSnapshot(resources, mirror, {
    ...guard,
    refused: options.refused,
    complete: snapshots.every((snapshot) => listOf(snapshot, type).complete),
  });
}

function listOf(snapshot: StoreSnapshot, type: ComparedType): FetchedList {
  return type === 'order' ? snapshot.orders : snapshot.menu[type];
}

import { isDeepStrictEqual } from 'node:util';

/** A resource object of an upstream snapshot document (JSON:API). */
export interface SnapshotResource {
  id: string;
  type: string;
  attributes: Record<string, unknown>;
  relationships?: Record<string, unknown>;
  /** For orders: the related resources an order event includes (order products, their options, the store …). */
  related?: SnapshotResource[];
}

/** What the read model holds for one resource of the owner. */
export interface MirrorResource {
  id: string;
  attributes: Record<string, unknown>;
  relationships: Record<string, unknown>;
  deleted: boolean;
}

export interface TypeDiff {
  created: SnapshotResource[];
  updated: SnapshotResource[];
  destroyed: string[];
  /** Why destroys were left out, when they were. */
  destroysSkipped?: string;
}

/** When absent-from-snapshot is not trusted as "destroyed upstream". */
export interface DestroyGuard {
  /** Why no absence can be trusted in this comparison at all (a store filter, several stores …), if so. */
  refused?: string;
  /** The snapshot of this type is complete and successful (every page read, every page recognised). */
  complete: boolean;
  /** Destroys are refused when they would remove more than this share of the owner's live resources … */
  maxRatio: number;
  /** … and more than this many of them (so small menus can still shrink). */
  minCount: number;
}

/**
 * The differences between an upstream snapshot and the mirror of one resource type for one owner
 * (reconcile, docs/reference.md §8). Attributes and relationships compare as JSON values (key order aside:
 * the mirror keeps jsonb). A resource is destroyed only when it is absent from a complete
 * snapshot, and never in bulk beyond the guard: an empty or truncated answer where the mirror has
 * many resources is implausible, and destroys nothing.
 */
export function diffSnapshot(snapshot: SnapshotResource[], mirror: MirrorResource[], guard: DestroyGuard): TypeDiff {
  const mirrored = new Map(mirror.map((resource) => [resource.id, resource]));
  const created: SnapshotResource[] = [];
  const updated: SnapshotResource[] = [];
  for (const resource of snapshot) {
    const known = mirrored.get(resource.id);
    if (known === undefined || known.deleted) created.push(resource);
    else if (
      !isDeepStrictEqual(known.attributes, resource.attributes) ||
      !isDeepStrictEqual(known.relationships, resource.relationships ?? {})
    )
      updated.push(resource);
  }
  const present = new Set(snapshot.map((resource) => resource.id));
  const live = mirror.filter((resource) => !resource.deleted);
  const absent = live.filter((resource) => !present.has(resource.id)).map((resource) => resource.id);
  if (absent.length === 0) return { created, updated, destroyed: [] };
  if (guard.refused !== undefined)
    return {
      created,
      updated,
      destroyed: [],
      destroysSkipped: `${guard.refused}; ${absent.length} absent resource(s) kept`,
    };
  if (!guard.complete)
    return {
      created,
      updated,
      destroyed: [],
      destroysSkipped: `the snapshot is incomplete: ${absent.length} absent resource(s) kept`,
    };
  if (absent.length > guard.minCount && absent.length > live.length * guard.maxRatio) {
    return {
      created,
      updated,
      destroyed: [],
      destroysSkipped: `implausible snapshot: it lacks ${absent.length} of ${live.length} mirrored resources; nothing destroyed`,
    };
  }
  return { created, updated, destroyed: absent };
}

/** One store of a pass, in a group (a connection's plan), and which attempt at it this is (1 for the first). */
export interface QueuedStore<G> {
  group: G;
  storeId: string;
  attempt: number;
}

interface Pending<G> {
  store: QueuedStore<G>;
  dueAt: number;
}

/** What a worker is handed: a store to work on, a time to wait (Infinity: until the queue changes), or nothing left. */
export type Take<G> = { store: QueuedStore<G> } | { waitMs: number } | null;

/**
 * The stores of a reconcile pass, handed to its workers (docs/reference.md §13). A worker gets a
 * due store of the group (connection) that has the fewest stores in work, on a tie the one with the
 * most stores left (then the earlier): the workers spread over all the connections, whose rate
 * budgets are apart, and the connections end together, none left for last with every worker
 * waiting on its one budget. A store given back to `done` with a time is due again then; the
 * others go on meanwhile.
 */
export class StoreQueue<G> {
  private readonly pending = new Map<G, Pending<G>[]>();
  private readonly inWork = new Map<G, number>();
  private readonly order: G[];
  private changed: { promise: Promise<void>; resolve: () => void } = signal();

  constructor(groups: Array<{ group: G; storeIds: string[] }>) {
    this.order = groups.map(({ group }) => group);
    for (const { group, storeIds } of groups) {
      this.pending.set(
        group,
        storeIds.map((storeId) => ({ store: { group, storeId, attempt: 1 }, dueAt: 0 })),
      );
      this.inWork.set(group, 0);
    }
  }

  take(now: number): Take<G> {
    let best: { group: G; index: number } | undefined;
    let soonest = Infinity;
    let left = 0;
    for (const group of this.order) {
      const waiting = this.pending.get(group)!;
      left += waiting.length + this.inWork.get(group)!;
      const index = waiting.findIndex((item) => item.dueAt <= now);
      for (const item of waiting) if (item.dueAt > now) soonest = Math.min(soonest, item.dueAt);
      if (index < 0) continue;
      if (best === undefined || this.before(group, best.group)) best = { group, index };
    }
    if (best !== undefined) {
      const [item] = this.pending.get(best.group)!.splice(best.index, 1);
      this.inWork.set(best.group, this.inWork.get(best.group)! + 1);
      return { store: item.store };
    }
    return left === 0 ? null : { waitMs: soonest === Infinity ? Infinity : soonest - now };
  }

  /** Whether `a` should have the next worker rather than `b`. */
  private before(a: G, b: G): boolean {
    const inWork = this.inWork.get(a)! - this.inWork.get(b)!;
    return inWork < 0 || (inWork === 0 && this.pending.get(a)!.length > this.pending.get(b)!.length);
  }

  /** The worker is done with `store`: it is settled, or given back to be due again at `dueAt`. */
  done(store: QueuedStore<G>, retryAt?: number): void {
    this.inWork.set(store.group, this.inWork.get(store.group)! - 1);
    if (retryAt !== undefined)
      this.pending.get(store.group)!.push({ store: { ...store, attempt: store.attempt + 1 }, dueAt: retryAt });
    this.notify();
  }

  /** Drops what is left of a group (its connection cannot go on); the stores in work still come back through done. */
  drop(group: G): QueuedStore<G>[] {
    const dropped = this.pending
      .get(group)!
      .splice(0)
      .map((item) => item.store);
    this.notify();
    return dropped;
  }

  /** Resolves at the next change (a store done, given back, or dropped). */
  whenChanged(): Promise<void> {
    return this.changed.promise;
  }

  private notify(): void {
    const current = this.changed;
    this.changed = signal();
    current.resolve();
  }
}

function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}

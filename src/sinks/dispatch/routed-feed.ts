import type { ChangePosition, ChangeText } from '../../changes/change.js';
import type { ChangeRouter, Route, RouteFilter } from '../../changes/change-router.service.js';

/** How many changes a sink following the shared read may have waiting before it leaves it and reads on its own. */
const MAX_ROUTED = 10_000;

/**
 * A worker's place on the shared read (ChangeRouter): the changes it was handed after the sink's
 * cursor wait here, in reader order, until its batches take them. One that lets more than
 * MAX_ROUTED wait has overrun: it leaves, and reads on its own again.
 */
export class RoutedFeed {
  private route: Route | null = null;
  private routed: ChangeText[] = [];
  private taken = 0;
  private over = false;

  constructor(private readonly router: ChangeRouter) {}

  /** Whether the worker follows the shared read. */
  get following(): boolean {
    return this.route !== null;
  }

  get overrun(): boolean {
    return this.over;
  }

  /** The router's position: every change after `from` up to it was handed (only while following). */
  get position(): ChangePosition {
    return this.route!.position;
  }

  /** How many changes wait. */
  get waiting(): number {
    return this.routed.length - this.taken;
  }

  /** Follows from `from`; `wake` is called whenever changes arrive. False when the router cannot take it yet. */
  join(filter: RouteFilter, from: ChangePosition, wake: () => void): boolean {
    this.route = this.router.join(filter, from, {
      deliver: (changes) => {
        if (this.waiting + changes.length > MAX_ROUTED) this.over = true;
        else this.routed.push(...changes);
        wake();
      },
    });
    return this.route !== null;
  }

  /** The next batch of at most `size` changes (still waiting until `taken`); none: the wait starts afresh. */
  next(size: number): ChangeText[] {
    const batch = this.routed.slice(this.taken, this.taken + size);
    if (batch.length === 0) {
      this.routed = [];
      this.taken = 0;
    }
    return batch;
  }

  /** The first `count` changes waiting were delivered. */
  delivered(count: number): void {
    this.taken += count;
  }

  /** Stops following: what waited is dropped (a read after the sink's cursor finds it again). */
  leave(): void {
    this.route?.close();
    this.route = null;
    this.routed = [];
    this.taken = 0;
    this.over = false;
  }
}

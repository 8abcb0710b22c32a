import { BeforeApplicationShutdown, Injectable, Logger } from '@nestjs/common';
import { ChangePosition, ChangeText } from './change.js';
import { comparePositions } from './change-cursor.js';
import { ChangeLogRepository } from './change-log.repository.js';
import { ChangeNotifier } from './change-notifier.service.js';

/** What a consumer follows: absent fields follow everything. */
export interface RouteFilter {
  ownerIds?: readonly string[];
  types?: readonly string[];
}

/** A consumer at the head: it is handed the changes its filter selects, in reader order. */
export interface RouteConsumer {
  /** Called with the changes after its position that it follows, oldest first (never empty). */
  deliver(changes: readonly ChangeText[]): void;
}

/** A consumer's place in the router; `close()` leaves it (the consumer then reads on its own). */
export interface Route {
  /** The router's position: the consumer has been handed every change it follows up to here. */
  readonly position: ChangePosition;
  close(): void;
}

/** How many changes one read takes from the log. */
const PAGE = 1000;
/** How many recent changes are kept for consumers joining from just behind the head. */
const KEPT = 5000;
/** The first and the longest wait before a read again, when a read failed or saw less than the notifier (doubling between). */
const RETRY_FIRST_MS = 25;
const RETRY_MAX_MS = 1000;

interface Entry {
  consumer: RouteConsumer;
  types: ReadonlySet<string> | null;
  /** Changes up to here the consumer has already (it read past the router before joining). */
  after: ChangePosition | null;
  pending: ChangeText[];
  open: boolean;
}

/**
 * The shared read of the change log (docs/design.md, "Fan-out"): one process reads each new page
 * once, whatever the number of its consumers (sinks at the head, SSE streams), and hands each change
 * to the consumers whose filters select it through an index by owner, so a change costs O(1) plus
 * O(consumers it concerns). A consumer behind the head reads on its own and joins once it has
 * caught up: from any position the router still keeps the changes after (the last KEPT changes).
 * The router reads gap-safely (below the readers' horizon) from the readable head it found when its
 * first consumer came, and stops reading when its last one leaves.
 */
@Injectable()
export class ChangeRouter implements BeforeApplicationShutdown {
  private readonly logger = new Logger(ChangeRouter.name);
  private readonly byOwner = new Map<string, Set<Entry>>();
  private readonly everyOwner = new Set<Entry>();
  private size = 0;
  /** The last change read (null: not started); every change after `floor` up to it is in `kept`. */
  private head: ChangePosition | null = null;
  private floor: ChangePosition | null = null;
  private kept: ChangeText[] = [];
  private starting: Promise<void> | null = null;
  private reading: Promise<void> | null = null;
  private again = false;
  private retry: NodeJS.Timeout | null = null;
  private retryMs = RETRY_FIRST_MS;
  private unwatch: (() => void) | null = null;
  private stopped = false;

  constructor(
    private readonly changes: ChangeLogRepository,
    private readonly notifier: ChangeNotifier,
  ) {}

  /** Consumers joined, for the metrics and the tests. */
  get consumers(): number {
    return this.size;
  }

  /**
   * Joins a consumer whose every change up to `from` was read (gap-safely), if the router keeps
   * the changes after it: the kept ones it follows are handed to it at once, the next ones as they
   * are read. Null when it cannot join yet (the router starting, or `from` older than what it keeps):
   * the consumer reads on its own and tries again.
   */
  join(filter: RouteFilter, from: ChangePosition, consumer: RouteConsumer): Route | null {
    if (this.stopped) return null;
    if (this.head === null || this.floor === null) {
      this.start();
      return null;
    }
    if (comparePositions(from, this.floor) < 0) return null;
    const entry: Entry = {
      consumer,
      types: filter.types === undefined ? null : new Set(filter.types),
      after: comparePositions(from, this.head) > 0 ? from : null,
      pending: [],
      open: true,
    };
    this.add(entry, filter.ownerIds);
    const owners = filter.ownerIds === undefined ? null : new Set(filter.ownerIds);
    const missed = this.kept.filter(
      (change) =>
        comparePositions(change.position, from) > 0 &&
        (owners === null || (change.ownerId !== null && owners.has(change.ownerId))) &&
        (entry.types === null || entry.types.has(change.type)),
    );
    if (missed.length > 0) consumer.deliver(missed);
    const position = () => this.head ?? from;
    return {
      get position() {
        return position();
      },
      close: () => this.remove(entry, filter.ownerIds),
    };
  }

  beforeApplicationShutdown(): void {
    this.stopped = true;
    this.unwatch?.();
    this.unwatch = null;
    this.cancelRetry();
  }

  private add(entry: Entry, ownerIds: readonly string[] | undefined): void {
    this.size++;
    if (ownerIds === undefined) {
      this.everyOwner.add(entry);
      return;
    }
    for (const owner of new Set(ownerIds)) {
      let entries = this.byOwner.get(owner);
      if (entries === undefined) this.byOwner.set(owner, (entries = new Set()));
      entries.add(entry);
    }
  }

  private remove(entry: Entry, ownerIds: readonly string[] | undefined): void {
    if (!entry.open) return;
    entry.open = false;
    this.size--;
    if (ownerIds === undefined) this.everyOwner.delete(entry);
    else
      for (const owner of new Set(ownerIds)) {
        const entries = this.byOwner.get(owner);
        entries?.delete(entry);
        if (entries?.size === 0) this.byOwner.delete(owner);
      }
    if (this.size === 0) this.idle();
  }

  /** Finds the readable head and starts following it (once; a failure is tried again at the next join). */
  private start(): void {
    this.starting ??= (async () => {
      try {
        const head = await this.changes.readablePosition();
        if (this.stopped || this.head !== null) return;
        this.head = head;
        this.floor = head;
        this.kept = [];
        this.unwatch = this.notifier.watch(() => this.read());
        this.read();
      } catch (error) {
        this.logger.warn({
          msg: 'the change router could not find the head; consumers read on their own',
          err: String(error),
        });
      } finally {
        this.starting = null;
      }
    })();
  }

  /** No consumer left: nothing is read until the next one joins. */
  private idle(): void {
    this.unwatch?.();
    this.unwatch = null;
    this.cancelRetry();
    this.head = null;
    this.floor = null;
    this.kept = [];
  }

  /**
   * Reads every page after the head (one read at a time; a wake during it reads again after). A
   * read that failed, or that ended before the head the notifier last saw (the horizon of its own
   * statement was held back: ChangeNotifier), is tried again after a while, so no consumer waits
   * for a next change to see one already committed.
   */
  private read(): void {
    this.cancelRetry();
    if (this.reading !== null) {
      this.again = true;
      return;
    }
    this.reading = (async () => {
      let failed: boolean;
      do {
        this.again = false;
        failed = false;
        try {
          while (this.head !== null && !this.stopped && (await this.readPage()) === PAGE);
        } catch (error) {
          failed = true;
          this.logger.warn({ msg: 'the change router could not read the change log', err: String(error) });
        }
      } while (this.again && !this.stopped);
      const behind = this.head !== null && (failed || this.notifier.isBehind(this.head));
      if (!behind) this.retryMs = RETRY_FIRST_MS;
      else if (!this.stopped) {
        this.retry = setTimeout(() => this.read(), this.retryMs).unref();
        this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
      }
    })().finally(() => (this.reading = null));
  }

  private cancelRetry(): void {
    if (this.retry !== null) clearTimeout(this.retry);
    this.retry = null;
  }

  private async readPage(): Promise<number> {
    const from = this.head!;
    const page = await this.changes.readTextsAfter(from, { limit: PAGE });
    // Idle meanwhile (or idle and started again): this page belongs to no one.
    if (this.head !== from || page.changes.length === 0) return 0;
    this.head = page.next;
    this.keep(page.changes);
    this.route(page.changes);
    return page.changes.length;
  }

  private keep(changes: readonly ChangeText[]): void {
    this.kept.push(...changes);
    if (this.kept.length <= KEPT) return;
    const dropped = this.kept.length - KEPT;
    this.floor = this.kept[dropped - 1].position;
    this.kept = this.kept.slice(dropped);
  }

  /** Hands each change to the consumers of its owner and to those of every owner, then calls each consumer once. */
  private route(changes: readonly ChangeText[]): void {
    const touched = new Set<Entry>();
    for (const change of changes) {
      const owned = change.ownerId === null ? undefined : this.byOwner.get(change.ownerId);
      if (owned !== undefined) for (const entry of owned) this.offer(entry, change, touched);
      for (const entry of this.everyOwner) this.offer(entry, change, touched);
    }
    for (const entry of touched) {
      const pending = entry.pending;
      entry.pending = [];
      if (entry.open) entry.consumer.deliver(pending);
    }
  }

  private offer(entry: Entry, change: ChangeText, touched: Set<Entry>): void {
    if (entry.types !== null && !entry.types.has(change.type)) return;
    if (entry.after !== null) {
      if (comparePositions(change.position, entry.after) <= 0) return;
      entry.after = null;
    }
    entry.pending.push(change);
    touched.add(entry);
  }
}

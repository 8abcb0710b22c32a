import { BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import type { OwnerScope } from '../common/owner-scope.js';
import { replicaOf } from '../database/read-replica.js';
import { onSide, ReadRouter, type ReadSide } from '../database/read-router.service.js';
import { Change, ChangeFilter, ChangePosition, ChangeText, START } from './change.js';
import { compactedAway, decodeChangeCursor, encodeChangeCursor, ExpiredChangeCursorError } from './change-cursor.js';
import { ChangeLogRepository } from './change-log.repository.js';
import { ChangeNotifier } from './change-notifier.service.js';
import { ChangeRouter } from './change-router.service.js';
import { ChangesQuery, TYPE_NAMES } from './changes.dto.js';

/** How long a stream waits for changes before it reads again anyway (the notifier wakes it sooner). */
const STREAM_WAIT_MS = 15_000;

/** How many changes a stream following the shared read may have waiting for its client before it reads on its own. */
const MAX_WAITING = 1000;

/** Where an SSE stream writes: one event per change (its JSON text), its id the change's cursor. */
export interface ChangeSink {
  push(json: string, cursor: string): void;
  /** The response the events go to, for back-pressure. */
  readonly stream: Writable;
}

/**
 * `GET /api/v1/changes` (docs/reference.md §11): pages, long-poll and SSE over the gap-safe
 * change-log reader, on the primary or the replica (ReadRouter): the replica holds a prefix of the
 * primary's commits, so a reader moving between them may wait, never skip.
 */
@Injectable()
export class ChangeFeedService implements BeforeApplicationShutdown {
  private readonly logger = new Logger(ChangeFeedService.name);
  private readonly streams = new Set<AbortController>();

  constructor(
    private readonly changes: ChangeLogRepository,
    private readonly notifier: ChangeNotifier,
    private readonly shared: ChangeRouter,
    private readonly router: ReadRouter,
    @Inject(replicaOf(ChangeLogRepository)) private readonly replicaChanges: ChangeLogRepository | null,
  ) {}

  /**
   * Where a reader starts: `Last-Event-ID` when given, else `after`, else the start of the log
   * (compacted or not, the log read from its start holds every resource's newest state). A cursor
   * below the compaction horizon is 410: the changes after it are no longer all there.
   */
  async start(after: string | undefined, lastEventId?: string): Promise<ChangePosition> {
    const { position, field } = cursorOf(after, lastEventId);
    if (compactedAway(position, await this.changes.compactionHorizon())) throw new ExpiredChangeCursorError(field);
    return position;
  }

  /** One page, read on `side`; with `wait`, answers as soon as at least one change is there, or empty when the wait ends. */
  async page(
    query: ChangesQuery,
    closed?: AbortSignal,
    side: ReadSide = 'primary',
    scope: OwnerScope = null,
  ): Promise<{ data: Change[]; next_cursor: string }> {
    const filter = this.filter(query, scope);
    const changes = onSide(side, this.changes, this.replicaChanges);
    const deadline = Date.now() + query.wait * 1000;
    // The page carries the compaction horizon of its own snapshot: no separate look at it (start()).
    const { position: from, field } = cursorOf(query.after);
    let seen = this.notifier.generation;
    let page = await changes.readAfter(from, filter);
    if (compactedAway(from, page.compactedTo)) throw new ExpiredChangeCursorError(field);
    while (page.changes.length === 0 && Date.now() < deadline && !closed?.aborted) {
      const routed = await this.waitRouted(filter, page.next, deadline, closed);
      if (routed !== null) return routed;
      await this.notifier.wait(deadline - Date.now(), closed, seen, page.next);
      seen = this.notifier.generation;
      page = await changes.readAfter(page.next, filter);
    }
    return { data: page.changes.map((entry) => entry.change), next_cursor: encodeChangeCursor(page.next) };
  }

  /**
   * A long-poll that has caught up waits on the shared read: the first changes it follows after
   * `from` (at most a page), or none when the wait ends, then with the router's position as the
   * cursor. Null when the router cannot take it yet (the caller waits and reads on its own).
   */
  private async waitRouted(
    filter: ChangeFilter,
    from: ChangePosition,
    deadline: number,
    closed?: AbortSignal,
  ): Promise<{ data: Change[]; next_cursor: string } | null> {
    const got: ChangeText[] = [];
    let wake: (() => void) | null = null;
    const route = this.shared.join(filter, from, {
      deliver: (changes) => {
        got.push(...changes);
        wake?.();
      },
    });
    if (route === null) return null;
    try {
      if (got.length === 0) {
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            closed?.removeEventListener('abort', done);
            resolve();
          };
          const timer = setTimeout(done, Math.max(0, deadline - Date.now()));
          closed?.addEventListener('abort', done, { once: true });
          wake = done;
        });
      }
      const page = got.slice(0, filter.limit);
      const next = page.at(-1)?.position ?? route.position;
      return { data: page.map((change) => JSON.parse(change.json) as Change), next_cursor: encodeChangeCursor(next) };
    } finally {
      route.close();
    }
  }

  /**
   * Streams changes from `from` until `closed` aborts or the daemon stops. A stream reads on its
   * own while it is behind (the first read on `side`, each next one where the router sends reads
   * then), and once it has caught up follows the shared read (ChangeRouter) until it ends or falls
   * too far behind its client.
   */
  async stream(
    sink: ChangeSink,
    from: ChangePosition,
    query: ChangesQuery,
    closed: AbortSignal,
    side: ReadSide = 'primary',
    scope: OwnerScope = null,
  ): Promise<void> {
    // One controller, aborted by the client's going or the daemon's stopping (AbortSignal.any
    // kept a third signal, its sets and weak references, per idle client).
    const stop = new AbortController();
    const end = () => stop.abort();
    closed.addEventListener('abort', end, { once: true });
    if (closed.aborted) end();
    this.streams.add(stop);
    const signal = stop.signal;
    const filter = this.filter(query, scope);
    let position = from;
    let next: ReadSide | undefined = side;
    try {
      while (!signal.aborted) {
        const seen = this.notifier.generation;
        const [page] = await this.router.run(next ?? (await this.router.side()), (on) =>
          onSide(on, this.changes, this.replicaChanges).readAfter(position, filter),
        );
        next = undefined;
        if (compactedAway(position, page.compactedTo)) {
          // Compaction passed this reader while it followed: end the stream; its reconnection
          // with Last-Event-ID is answered 410, and it bootstraps again.
          this.logger.warn({ msg: 'change stream ended: compaction passed its position' });
          return;
        }
        for (const entry of page.changes) {
          if (signal.aborted) return;
          sink.push(JSON.stringify(entry.change), encodeChangeCursor(entry.position));
          if (sink.stream.writableNeedDrain) await once(sink.stream, 'drain', { signal }).catch(() => undefined);
        }
        position = page.next;
        if (page.changes.length === filter.limit) continue;
        const left = await this.follow(sink, position, filter, signal);
        if (left !== null) position = left;
        else await this.notifier.wait(STREAM_WAIT_MS, signal, seen, position);
      }
    } catch (error) {
      // The client resumes from its Last-Event-ID on its next connection.
      this.logger.warn({ msg: 'change stream ended by an error', err: String(error) });
    } finally {
      closed.removeEventListener('abort', end);
      this.streams.delete(stop);
    }
  }

  /**
   * Follows the shared read from `from` (every change up to it was pushed): null when the router
   * cannot take the stream yet, else the position of the last change pushed when it left the
   * router (its client too slow, or the stream ended), from which it reads on its own.
   */
  private async follow(
    sink: ChangeSink,
    from: ChangePosition,
    filter: ChangeFilter,
    signal: AbortSignal,
  ): Promise<ChangePosition | null> {
    const waiting: ChangeText[] = [];
    let taken = 0;
    let overrun = false;
    let wake: (() => void) | null = null;
    const route = this.shared.join(filter, from, {
      deliver: (changes) => {
        if (waiting.length - taken + changes.length > MAX_WAITING) overrun = true;
        else waiting.push(...changes);
        wake?.();
      },
    });
    if (route === null) return null;
    const aborted = () => wake?.();
    signal.addEventListener('abort', aborted, { once: true });
    let position = from;
    try {
      while (!signal.aborted && !overrun) {
        if (taken === waiting.length) {
          waiting.length = taken = 0;
          await new Promise<void>((resolve) => (wake = resolve));
          wake = null;
          continue;
        }
        const change = waiting[taken++];
        sink.push(change.json, encodeChangeCursor(change.position));
        position = change.position;
        if (sink.stream.writableNeedDrain) await once(sink.stream, 'drain', { signal }).catch(() => undefined);
      }
      return position;
    } finally {
      route.close();
      signal.removeEventListener('abort', aborted);
    }
  }

  beforeApplicationShutdown(): void {
    for (const stream of this.streams) stream.abort();
  }

  /** What a reader follows: its `owner_id` (ApiTokenGuard has checked it is in `scope`), else the token's owners. */
  private filter(query: ChangesQuery, scope: OwnerScope): ChangeFilter {
    return {
      limit: query.limit,
      types: query.type === undefined ? undefined : [...new Set(query.type.map((name) => TYPE_NAMES[name]))],
      ownerIds: query.owner_id === undefined ? (scope ?? undefined) : [query.owner_id],
    };
  }
}

/** The cursor a reader gave (`Last-Event-ID` before `after`) and which field it came in; none: the start. */
function cursorOf(
  after: string | undefined,
  lastEventId?: string,
): { position: ChangePosition; field: 'after' | 'Last-Event-ID' } {
  const field = lastEventId !== undefined && lastEventId !== '' ? 'Last-Event-ID' : 'after';
  const cursor = field === 'after' ? after : lastEventId;
  return { position: cursor === undefined ? START : decodeChangeCursor(cursor, field), field };
}

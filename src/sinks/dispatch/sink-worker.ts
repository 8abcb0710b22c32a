import { Logger } from '@nestjs/common';
import type { ChangePosition } from '../../changes/change.js';
import { START } from '../../changes/change.js';
import { compactedAway, comparePositions } from '../../changes/change-cursor.js';
import { WakeableSleep } from '../../common/wakeable-sleep.js';
import { backoffDelayMs } from '../backoff.js';
import { DeliveryOutcome } from '../delivery.js';
import { Sink, stateAfterFailure } from '../sink.js';
import { SinkLag } from './sink-lag.js';
import { inSnapshot } from '../sink-start.js';
import { isTableKind } from '../tables/table-target.js';
import { RoutedFeed } from './routed-feed.js';
import { asEntry, ReadAhead, readKey, readSinkPage, SinkChange } from './sink-pages.js';
import { acknowledged, attemptOf, sendBatch } from './sink-sends.js';
import type { SinkWorkerDeps } from './sink-worker-deps.js';

/**
 * The delivery loop of one sink: read the changes after its cursor, deliver them as one batch,
 * move the cursor only once the target acknowledged, else back off. Each sink has its own loop,
 * so a sink whose target hangs or fails waits alone (isolation).
 */

export class SinkWorker {
  private readonly logger = new Logger(SinkWorker.name);
  private readonly stopController = new AbortController();
  private readonly alarm = new WakeableSleep();
  /** The sink as this worker last knew it (its last acknowledgement's row, or as read); null: read it. */
  private known: Sink | null = null;
  /** The sink was changed (the API, another process): read it before the next round. */
  private stale = false;
  private ahead: ReadAhead | null = null;
  /** The readers' horizon of the last page read (see ChangeFilter.horizon). */
  private horizon: string | undefined;
  private recording: Promise<boolean> | null = null;
  private readonly lag: SinkLag;
  private finishing = false;
  /** A table sink resumes from its target's cursor: on start and after every failure (docs/reference.md §12). */
  private targetUnread = true;
  /** Following the shared read: its changes after the sink's cursor wait there. */
  private readonly feed: RoutedFeed;
  /** When the sink's cursor was last written (or read), for idleCursorMs. */
  private cursorAt = Date.now();
  readonly done: Promise<void>;

  constructor(
    readonly sinkId: string,
    private readonly deps: SinkWorkerDeps,
  ) {
    this.lag = new SinkLag(deps.repository, deps.metrics, deps.defaultTypes, deps.db);
    this.feed = new RoutedFeed(deps.router);
    deps.reading?.(this, true);
    this.done = this.run();
  }

  /** The sink was changed: read it and look again now. */
  wake(): void {
    this.stale = true;
    this.alarm.wake();
  }

  /** There may be new changes: look again now, with the sink as known (the shared read hands a following worker its own). */
  wakeForChanges(): void {
    if (!this.feed.following) this.alarm.wake();
  }

  /** Whether the worker follows the shared read. */
  get following(): boolean {
    return this.feed.following;
  }

  /** Wakes a worker following the shared read whose cursor is older than idleCursorMs, to write it forward. */
  nudgeIdle(now = Date.now()): void {
    if (this.feed.following && now - this.cursorAt > this.deps.idleCursorMs) this.alarm.wake();
  }

  /** Ends the loop; `finish` lets the batch in flight get its answer first (a lease handed on), else it is cut short. */
  stop(finish = false): Promise<void> {
    if (finish) this.finishing = true;
    else this.stopController.abort();
    this.alarm.stop();
    return this.done;
  }

  get stopped(): boolean {
    return this.stopController.signal.aborted;
  }

  private async run(): Promise<void> {
    while (!this.stopped && !this.finishing) {
      try {
        const wait = await this.step();
        if (wait > 0) await this.alarm.sleep(wait);
        // An idle wait that no wake cut short ends with a read of the sink (the safety net of a
        // worker reading on its own; one following the shared read is woken for everything).
        if (wait >= this.deps.idlePollMs && !this.alarm.isWoken && !this.feed.following) this.known = null;
      } catch (error) {
        this.logger.error({ msg: 'sink delivery loop failed; retrying', sink: this.sinkId, err: error });
        await this.alarm.sleep(1000);
      }
    }
    this.leave();
    await this.settle().catch((error) =>
      this.logger.error({ msg: 'sink cursor move failed', sink: this.sinkId, err: error }),
    );
    this.deps.reading?.(this, false);
    await this.deps.tables.release(this.sinkId);
    await this.lag.settled();
  }

  /** A statement of this loop's on the daemon's database, in turn with every other loop's (SinkWorkerDeps.db). */
  private db<T>(work: () => Promise<T>): Promise<T> {
    return this.deps.db.run(work);
  }

  /** One round; answers how long to wait before the next (0: at once). */
  private async step(): Promise<number> {
    // The row the last acknowledgement returned (or the last round read) is current unless the sink
    // was changed since (wake).
    this.alarm.takeWake();
    const known = this.stale ? null : this.known;
    this.stale = false;
    this.known = null;
    let sink = known;
    if (sink === null) {
      // Its filters, cursor or epoch may have changed: it reads on its own again until it caught up.
      this.leave();
      await this.settle();
      sink = await this.db(() => this.deps.repository.find(this.sinkId));
      this.cursorAt = Date.now();
    }
    if (sink === null || sink.state === 'disabled') {
      this.stopController.abort();
      this.deps.stopped?.(this.sinkId);
      return 0;
    }
    if (sink.snapshotTo !== null && !inSnapshot(sink)) {
      await this.deps.snapshots.finish(sink);
      sink = { ...sink, snapshotTo: null };
    }
    const now = Date.now();
    if (sink.nextAttemptAt !== null && sink.nextAttemptAt.getTime() > now) {
      return Math.min(sink.nextAttemptAt.getTime() - now, 1000);
    }
    if (isTableKind(sink.kind) && this.targetUnread) return this.resumeFromTarget(sink);
    if (this.feed.overrun) this.leave();
    if (this.feed.following) return this.stepFollowing(sink);
    this.lag.soon(sink);
    const ahead = this.ahead;
    this.ahead = null;
    const page =
      (ahead !== null && ahead.key === readKey(sink) ? await ahead.page : null) ??
      (await this.db(() => readSinkPage(this.deps, sink)));
    if (await this.behindHorizon(sink, page.compactedTo)) return 0;
    this.horizon = page.horizon;
    const batch =
      sink.inflight === null
        ? page.changes
        : page.changes.filter((entry) => comparePositions(entry.position, sink.inflight!) <= 0);
    if (batch.length === 0) {
      if (this.lag.last !== 0) await this.lag.now(sink);
      // Caught up: the shared read hands it what comes after what it read, and nothing is written
      // for the changes of others it passed (a read after its cursor finds none of its own there).
      if (!inSnapshot(sink) && sink.inflight === null && this.join(sink, page.next)) {
        this.known = sink;
        return 0;
      }
      if (comparePositions(page.next, sink.cursor) > 0) {
        if (!(await this.settle())) return 0;
        this.known = await this.db(() => this.deps.repository.recordSuccess(sink.id, sink.cursor, page.next, false));
        return 0;
      }
      this.known = sink;
      return this.alarm.isWoken ? 0 : this.deps.idlePollMs;
    }
    // A snapshot's batch is recorded before it is sent, as a short one: compaction may take a change
    // out of the snapshot meanwhile, and a retry must still send the batch it sent under that id.
    return (await this.deliver(sink, batch, batch.length === sink.batchSize && !inSnapshot(sink))).wait;
  }

  /**
   * A round of a worker following the shared read: its next batch is the changes waiting, which are
   * exactly those a read after its cursor would find (the shared read hands it every change it
   * follows, in reader order). Idle, it waits for the router's wake, without a timer; its cursor is
   * written forward only once it is idleCursorMs old.
   */
  private async stepFollowing(sink: Sink): Promise<number> {
    this.lag.known(sink, this.feed.waiting);
    const batch = this.feed.next(sink.batchSize);
    if (batch.length === 0) {
      const head = this.feed.position;
      if (Date.now() - this.cursorAt > this.deps.idleCursorMs && comparePositions(head, sink.cursor) > 0) {
        if (!(await this.settle())) return 0;
        this.known = await this.db(() => this.deps.repository.recordSuccess(sink.id, sink.cursor, head, false));
        this.cursorAt = Date.now();
        return 0;
      }
      this.known = sink;
      return this.alarm.isWoken ? 0 : Infinity;
    }
    const changes = isTableKind(sink.kind) ? batch.map(asEntry) : batch;
    const { wait, ok } = await this.deliver(sink, changes, batch.length === sink.batchSize, false);
    if (ok) this.feed.delivered(batch.length);
    // A failed batch is retried as a sink reading on its own does (its end recorded if short).
    else this.leave();
    return wait;
  }

  /** Follows the shared read from `from` (every change the sink follows up to it delivered); false when it cannot yet. */
  private join(sink: Sink, from: ChangePosition): boolean {
    const filter = {
      types: sink.types ?? this.deps.defaultTypes,
      ...(sink.ownerIds === null ? {} : { ownerIds: sink.ownerIds }),
    };
    const joined = this.feed.join(filter, from, () => this.alarm.wake());
    if (joined) this.deps.reading?.(this, false);
    return joined;
  }

  /** Stops following the shared read: the next round reads after the sink's cursor on its own. */
  private leave(): void {
    if (this.feed.following) this.deps.reading?.(this, true);
    this.feed.leave();
  }

  /**
   * A batch's webhook-id comes from (sink, epoch, cursor, last change): a retry must send the same
   * batch. A full batch is found again as it was by reading after the same cursor (what lies below
   * the readers' horizon does not change but by compaction, which restarts the sink in a new
   * epoch); a short one could grow with changes that arrived since, so its end is recorded before
   * it is sent, and a retry after a crash sends exactly it.
   */
  private async deliver(
    sink: Sink,
    batch: SinkChange[],
    full: boolean,
    readAhead = true,
  ): Promise<{ wait: number; ok: boolean }> {
    const last = batch[batch.length - 1].position;
    if (sink.inflight === null && !full) {
      if (!(await this.settle())) return { wait: 0, ok: false };
      await this.deps.writes.setInflight(sink.id, sink.cursor, last);
    }
    // Catching up, the next page is read while the target handles this batch (read only: the
    // cursor still moves only after the acknowledgement, and one batch is in flight).
    const next = { ...sink, cursor: last };
    // A failed read ahead answers null: the next round reads again.
    const ahead =
      full && readAhead
        ? { key: readKey(next), page: readSinkPage(this.deps, next, this.horizon).catch(() => null) }
        : null;
    const started = process.hrtime.bigint();
    const outcome = await sendBatch(this.deps, sink, batch, last, this.stopController.signal);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    this.deps.metrics.sinks.observeSeconds(sink, seconds);
    if (!this.stopped || outcome.kind === 'ok') this.recordAttempt(sink, batch, outcome, seconds);
    // The cursor move of the batch before (if still being written) comes first: compare-and-set
    // from where it left the cursor. If it found the cursor moved (a replay), this batch's is void.
    if (!(await this.settle())) return { wait: 0, ok: false };
    if (outcome.kind === 'ok') {
      this.deps.metrics.sinks.delivered(sink, 'ok');
      this.lag.delivered(sink, batch.length);
      this.cursorAt = Date.now();
      if (ahead === null && !readAhead) {
        // Following the shared read: the move commits without waiting for the disk, as a catching-up
        // one does; a batch after it records its end synchronously, which makes this move durable first.
        const moved = await this.deps.writes.moveCursor(sink.id, sink.cursor, last);
        this.known = moved ? acknowledged(sink, last) : null;
        return { wait: 0, ok: moved };
      }
      if (ahead === null) {
        this.known = await this.db(() => this.deps.repository.recordSuccess(sink.id, sink.cursor, last, true));
        // Null: the cursor had moved (a replay): the next round reads the sink afresh.
        return { wait: 0, ok: this.known !== null };
      }
      // Catching up: the next batch goes out while this cursor move is written. The target has
      // acknowledged this one, so still one batch in flight; a crash before the move commits (or,
      // for PostgreSQL, before it reaches the disk) resends the batches under the same ids.
      const recorded = this.deps.writes.moveCursor(sink.id, sink.cursor, last);
      recorded.catch(() => undefined);
      this.recording = recorded;
      this.known = acknowledged(sink, last);
      this.ahead = ahead;
      return { wait: 0, ok: true };
    }
    if (this.stopped) return { wait: 0, ok: false };
    if (outcome.kind === 'gone') {
      this.deps.metrics.sinks.delivered(sink, 'disabled');
      this.logger.warn({ msg: 'sink disabled: its target answered 410 Gone', sink: sink.id });
      await this.db(() =>
        this.deps.repository.recordFailure(sink.id, sink.cursor, {
          error: outcome.error,
          nextAttemptAt: new Date(),
          state: 'disabled',
          failingSince: sink.failingSince ?? new Date(),
          inflight: last,
        }),
      );
      return { wait: 0, ok: false };
    }
    return { wait: await this.backOff(sink, outcome, last), ok: false };
  }

  /**
   * Takes the target's cursor when the target holds one of this replay epoch that differs from the
   * sink's. A failed read is an attempt of no batch: the target was tried and answered that.
   */
  private async resumeFromTarget(sink: Sink): Promise<number> {
    const started = process.hrtime.bigint();
    const read = await this.deps.tables.targetCursor(sink);
    if ('failure' in read) {
      const failure = read.failure as Extract<DeliveryOutcome, { kind: 'retry' }>;
      if (!this.stopped) this.recordAttempt(sink, [], failure, Number(process.hrtime.bigint() - started) / 1e9);
      return this.backOff(sink, failure, sink.inflight);
    }
    this.targetUnread = false;
    const target = read.cursor;
    if (target === null || target.epoch !== sink.epoch || comparePositions(target.cursor, sink.cursor) === 0) return 0;
    if (!(await this.settle())) return 0;
    this.logger.log({ msg: "table sink resumes from its target's cursor", sink: sink.id });
    this.known = await this.db(() => this.deps.repository.recordSuccess(sink.id, sink.cursor, target.cursor, false));
    return 0;
  }

  private async backOff(
    sink: Sink,
    outcome: Extract<DeliveryOutcome, { kind: 'retry' }>,
    last: ChangePosition | null,
  ): Promise<number> {
    this.targetUnread = true;
    const now = new Date();
    const attempt = sink.attempts + 1;
    const delay = backoffDelayMs(attempt, Math.random, outcome.retryAfterMs);
    const failingSince = sink.failingSince ?? now;
    const state = stateAfterFailure(failingSince, now, this.deps.failingAfterMs);
    this.deps.metrics.sinks.delivered(sink, 'retry');
    this.logger.warn({
      msg: 'sink delivery failed; retrying',
      sink: sink.id,
      attempt,
      delay_ms: delay,
      state,
      error: outcome.error,
    });
    await this.db(() =>
      this.deps.repository.recordFailure(sink.id, sink.cursor, {
        error: outcome.error,
        nextAttemptAt: new Date(now.getTime() + delay),
        state,
        failingSince,
        inflight: last,
      }),
    );
    return Math.min(delay, 1000);
  }

  /** What was sent and what the target answered (docs/reference.md §12); an attempt cut short by shutdown is none. */
  private recordAttempt(sink: Sink, batch: SinkChange[], outcome: DeliveryOutcome, seconds: number): void {
    this.deps.attempts.record(attemptOf(sink, batch, outcome, seconds));
    const ok = outcome.kind === 'ok';
    this.deps.activity.add(ok ? 'deliveries' : 'failures', sink.kind, ok ? batch.length : 1);
  }

  /**
   * Waits for the cursor move still being written (catching up), if any. False if it found the
   * cursor moved meanwhile (a replay): what this round was about to write is void, and the next
   * round reads the sink afresh.
   */
  private async settle(): Promise<boolean> {
    const recording = this.recording;
    if (recording === null) return true;
    this.recording = null;
    try {
      if (await recording) return true;
      this.known = null;
      return false;
    } catch (error) {
      this.known = null;
      throw error;
    }
  }

  /**
   * A cursor below the compaction horizon (read with the page, in its snapshot) has lost changes
   * in between; what compaction kept is the newest change of every resource, so starting over from
   * the start publishes the current state of every resource the sink follows, then everything
   * after it (docs/reference.md §11).
   */
  private async behindHorizon(sink: Sink, compactedTo: ChangePosition): Promise<boolean> {
    if (!compactedAway(sink.cursor, compactedTo)) return false;
    this.logger.warn({
      msg: 'sink cursor is older than the change log keeps: publishing the current state from the start',
      sink: sink.id,
    });
    if (!(await this.settle())) return true;
    await this.db(() => this.deps.repository.restartFrom(sink.id, sink.cursor, START));
    return true;
  }
}

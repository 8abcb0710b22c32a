import type { Logger } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { WakeableSleep } from '../common/wakeable-sleep.js';
import { AdvisoryLock, advisoryLocks } from '../database/advisory-locks.js';
import { MetricsService } from '../observability/metrics.service.js';
import type { ProjectionDefinition } from './projection-definitions.js';
import { PAGE_ENTRIES, PageResult, ProjectionRepository } from './projection.repository.js';

const POLL_MS = 1000;
/** While the lane lock is still held by a session on its way out (a predecessor's lane finishing its page). */
const LOCK_POLL_MS = 250;
/**
 * After a partial page, deliveries gather this long into the next one (bounds freshness, saves CPU):
 * briefly when they trickle in, longer under a heavy stream, where each page's fixed cost (its round
 * trips and the planning of its statement) would otherwise take CPU from ingress on the same machine.
 */
const COALESCE_MS = 20;
const BUSY_COALESCE_MS = 250;
const BUSY_PAGE_ENTRIES = 500;
/** A page that found none of the entries a lane was woken for looks again after this, doubling up to POLL_MS. */
const HELD_BACK_FIRST_MS = 20;

export type LaneState = 'starting' | 'running';

/** Where a lane applies its pages: a session, once `tryAcquire` took the lane lock on it (an AdvisoryLease, say). */
export interface LaneSession {
  tryAcquire(): Promise<boolean>;
  readonly runner: QueryRunner | undefined;
}

/** The session advisory lock held by the session that applies `projection`'s pages. */
export const laneLock = (projection: ProjectionDefinition): AdvisoryLock =>
  advisoryLocks.inSpace('projectorLane', projection.lockKey);

/**
 * One projection's catch-up loop in the active projector: it takes the projection's lane lock on
 * its session, then applies pages there until stopped. A projection is only ever applied by the
 * session holding its lane lock, so when that session dies, its page and its lock end together.
 * It wakes when ingress appends, and polls as a fallback.
 */
export class ProjectorLane {
  state: LaneState = 'starting';
  private readonly alarm = new WakeableSleep();
  /** Wakes for appends of this projection's types, and how many of them a page has answered. */
  private wakes = 0;
  private answered = 0;
  private heldBackMs = HELD_BACK_FIRST_MS;

  constructor(
    readonly projection: ProjectionDefinition,
    private readonly repository: ProjectionRepository,
    private readonly metrics: MetricsService,
    private readonly logger: Logger,
    /**
     * Called after each page that moved the checkpoint. Its transaction had an id, which held back
     * event_log_horizon() for the other lanes while it was open: one that found nothing meanwhile
     * must look again now rather than at its next poll.
     */
    private readonly committed: () => void,
  ) {}

  /**
   * Appends happened: `eventTypes`, when known, are the types appended, and a lane none of them
   * concerns sleeps on (the other projection's stream moves its checkpoint once a poll, in one page).
   */
  wake(eventTypes?: readonly string[]): void {
    if (eventTypes !== undefined && !eventTypes.some((type) => this.projection.eventTypes.has(type))) return;
    this.wakes++;
    this.alarm.wake();
  }

  /**
   * Another lane committed a page. Its transaction had an id, which held back event_log_horizon()
   * while it was open: a lane still waiting for an append it was woken for looks again now.
   */
  wakeIfWaiting(): void {
    if (this.wakes > this.answered) this.alarm.wake();
  }

  /** The lane ends after the page under way, if any. */
  stop(): void {
    this.alarm.stop();
  }

  async run(session: LaneSession): Promise<void> {
    for (;;) {
      if (this.alarm.isStopped) return;
      if (await session.tryAcquire()) break;
      await this.alarm.pause(LOCK_POLL_MS);
    }
    this.state = 'running';
    const runner = session.runner!;
    while (!this.alarm.isStopped) {
      // A delivery appended while the page is applied may lie past it: it is not slept over.
      this.alarm.takeWake();
      const wakes = this.wakes;
      const { entries, relevant } = await this.applyPage(runner);
      if (entries === PAGE_ENTRIES) continue;
      if (relevant > 0) {
        this.answered = wakes;
        this.heldBackMs = HELD_BACK_FIRST_MS;
        await this.alarm.pause(entries >= BUSY_PAGE_ENTRIES ? BUSY_COALESCE_MS : COALESCE_MS);
      } else if (wakes > this.answered) {
        // Woken for entries it did not find: their readers' horizon was held back, or an earlier page had them.
        await this.alarm.pause(this.heldBackMs);
        this.heldBackMs *= 2;
        if (this.heldBackMs > POLL_MS) [this.answered, this.heldBackMs] = [wakes, HELD_BACK_FIRST_MS];
      } else await this.alarm.sleep(POLL_MS);
    }
  }

  private async applyPage(runner: QueryRunner): Promise<PageResult> {
    const { name } = this.projection;
    const page = await this.repository.applyPage(runner, this.projection, PAGE_ENTRIES);
    if (page.parked > 0) this.logger.warn({ msg: 'parked events', projection: name, count: page.parked });
    if (page.entries > 0) {
      this.metrics.projectionPosition.set({ projection: name }, Number(page.checkpoint.position));
      this.committed();
    }
    return page;
  }
}

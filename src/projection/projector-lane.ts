import type { Logger } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { WakeableSleep } from '../common/wakeable-sleep.js';
import { AdvisoryLock, advisoryLocks } from '../database/advisory-locks.js';
import { MetricsService } from '../observability/metrics.service.js';
import type { ProjectionDefinition } from './projection-definitions.js';
import { PAGE_ENTRIES, ProjectionRepository } from './projection.repository.js';

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

  wake(): void {
    this.alarm.wake();
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
      const entries = await this.applyPage(runner);
      if (entries === 0) await this.alarm.sleep(POLL_MS);
      else if (entries < PAGE_ENTRIES)
        await this.alarm.pause(entries >= BUSY_PAGE_ENTRIES ? BUSY_COALESCE_MS : COALESCE_MS);
    }
  }

  private async applyPage(runner: QueryRunner): Promise<number> {
    const { name } = this.projection;
    const page = await this.repository.applyPage(runner, this.projection, PAGE_ENTRIES);
    if (page.parked > 0) this.logger.warn({ msg: 'parked events', projection: name, count: page.parked });
    if (page.entries > 0) {
      this.metrics.projectionPosition.set({ projection: name }, Number(page.checkpoint.position));
      this.committed();
    }
    return page.entries;
  }
}

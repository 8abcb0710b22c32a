import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { LeaseLoop, LeaseState } from '../common/lease-loop.js';
import { AppConfig } from '../config/app-config.js';
import { AdvisoryLease } from '../database/advisory-lease.js';
import { advisoryLocks } from '../database/advisory-locks.js';
import { LOG_APPENDED } from '../event-log/append-batcher.js';
import { MetricsService } from '../observability/metrics.service.js';
import { PROJECTIONS } from './projection-definitions.js';
import { PAGE_ENTRIES, ProjectionRepository } from './projection.repository.js';

/** Any constant: one projector per database (docs/reference.md §4). */
export const PROJECTOR_LOCK = advisoryLocks.single('projector');
const POLL_MS = 1000;
/**
 * After a partial page, deliveries gather this long into the next one (bounds freshness, saves CPU):
 * briefly when they trickle in, longer under a heavy stream, where each page's fixed cost (its round
 * trips and the planning of its statement) would otherwise take CPU from ingress on the same machine.
 */
const COALESCE_MS = 20;
const BUSY_COALESCE_MS = 250;
const BUSY_PAGE_ENTRIES = 500;

export type ProjectorState = LeaseState | 'disabled';

/**
 * The catch-up loop. It holds a session advisory lock on a dedicated connection and applies every
 * page on that same connection, so if the connection dies, its work and its lock die together and
 * a standby (another daemon polling for the lock) continues from the committed checkpoint.
 * It wakes when ingress appends, and polls as a fallback.
 */
@Injectable()
export class ProjectorService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(ProjectorService.name);
  private readonly loop: LeaseLoop;
  private disabled = false;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly repository: ProjectionRepository,
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
  ) {
    this.loop = new LeaseLoop(new AdvisoryLease(dataSource, PROJECTOR_LOCK, (runner) => repository.prepare(runner)), {
      role: 'projector',
      logger: this.logger,
      whileHeld: (runner) => this.project(runner),
    });
  }

  get state(): ProjectorState {
    return this.disabled ? 'disabled' : this.loop.state;
  }

  onApplicationBootstrap(): void {
    if (this.config.hasRole('projector')) this.loop.start();
    else this.disabled = true;
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.loop.stop();
  }

  @OnEvent(LOG_APPENDED)
  onAppended(): void {
    this.loop.alarm.wake();
  }

  private async project(runner: QueryRunner): Promise<void> {
    const alarm = this.loop.alarm;
    while (!this.loop.stopping) {
      // A delivery appended while the pages are applied may lie past them: it is not slept over.
      alarm.takeWake();
      const applied = await this.applyAll(runner);
      if (applied === 0) await alarm.sleep(POLL_MS);
      else if (applied < PAGE_ENTRIES) await alarm.pause(applied >= BUSY_PAGE_ENTRIES ? BUSY_COALESCE_MS : COALESCE_MS);
    }
  }

  private async applyAll(runner: QueryRunner): Promise<number> {
    let entries = 0;
    for (const projection of PROJECTIONS) {
      const page = await this.repository.applyPage(runner, projection, PAGE_ENTRIES);
      entries += page.entries;
      if (page.parked > 0) this.logger.warn({ msg: 'parked events', projection: projection.name, count: page.parked });
      if (page.entries > 0)
        this.metrics.projectionPosition.set({ projection: projection.name }, Number(page.checkpoint.position));
    }
    return entries;
  }
}

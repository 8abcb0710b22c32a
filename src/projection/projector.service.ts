import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
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
const STANDBY_POLL_MS = 2000;
const RETRY_MS = 1000;

export type ProjectorState = 'starting' | 'running' | 'standby' | 'stopped' | 'failing' | 'disabled';

/**
 * The catch-up loop. It holds a session advisory lock on a dedicated connection and applies every
 * page on that same connection, so if the connection dies, its work and its lock die together and
 * a standby (another daemon polling for the lock) continues from the committed checkpoint.
 * It wakes when ingress appends, and polls as a fallback.
 */
@Injectable()
export class ProjectorService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(ProjectorService.name);
  private readonly lease: AdvisoryLease;
  private stopping = false;
  private loop?: Promise<void>;
  private wake?: () => void;
  private pendingWake = false;
  state: ProjectorState = 'starting';

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly repository: ProjectionRepository,
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
  ) {
    this.lease = new AdvisoryLease(dataSource, PROJECTOR_LOCK, (runner) => repository.prepare(runner));
  }

  onApplicationBootstrap(): void {
    if (!this.config.PROJECTOR_ENABLED) {
      this.state = 'disabled';
      return;
    }
    this.loop = this.run();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    await this.loop;
    if (this.state !== 'disabled') this.state = 'stopped';
  }

  @OnEvent(LOG_APPENDED)
  onAppended(): void {
    this.pendingWake = true;
    this.wake?.();
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      try {
        if (!(await this.acquire())) {
          this.state = 'standby';
          await this.sleep(STANDBY_POLL_MS);
          continue;
        }
        this.state = 'running';
        while (!this.stopping) {
          this.pendingWake = false;
          const applied = await this.applyAll();
          if (applied === 0) {
            if (!this.pendingWake) await this.sleep(POLL_MS);
          } else if (applied < PAGE_ENTRIES) {
            await new Promise((resolve) =>
              setTimeout(resolve, applied >= BUSY_PAGE_ENTRIES ? BUSY_COALESCE_MS : COALESCE_MS),
            );
          }
        }
      } catch (error) {
        this.state = 'failing';
        this.logger.error({ msg: 'projector failed; retrying', err: error });
        await this.release();
        await this.sleep(RETRY_MS);
      }
    }
    await this.release();
  }

  private async applyAll(): Promise<number> {
    let entries = 0;
    for (const projection of PROJECTIONS) {
      const page = await this.repository.applyPage(this.lease.runner!, projection, PAGE_ENTRIES);
      entries += page.entries;
      if (page.parked > 0) this.logger.warn({ msg: 'parked events', projection: projection.name, count: page.parked });
      if (page.entries > 0)
        this.metrics.projectionPosition.set({ projection: projection.name }, Number(page.checkpoint.position));
    }
    return entries;
  }

  private async acquire(): Promise<boolean> {
    const locked = await this.lease.tryAcquire();
    if (locked) this.logger.log('this daemon is the active projector');
    return locked;
  }

  private release(): Promise<void> {
    return this.lease.release();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}

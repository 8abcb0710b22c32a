import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { LeaseLoop, LeaseState } from '../common/lease-loop.js';
import { AppConfig } from '../config/app-config.js';
import { AdvisoryLease, tryLock } from '../database/advisory-lease.js';
import { advisoryLocks } from '../database/advisory-locks.js';
import { ChannelListener } from '../database/channel-listener.js';
import { LOG_APPENDED, type LogAppended } from '../event-log/append-batcher.js';
import { APPENDED_CHANNEL, AppendSignal } from '../event-log/append-signal.js';
import { MetricsService } from '../observability/metrics.service.js';
import { PROJECTIONS, ProjectionName } from './projection-definitions.js';
import { ProjectionRepository } from './projection.repository.js';
import { laneLock, LaneSession, ProjectorLane } from './projector-lane.js';

/** Any constant: one projector per database (docs/reference.md §4). */
export const PROJECTOR_LOCK = advisoryLocks.single('projector');

export type ProjectorState = LeaseState | 'disabled';

/**
 * The live projector. It holds the projector lease (a session advisory lock) so that one daemon
 * per database projects, while the others stand by and take over when its session ends. While it
 * holds the lease, each projection has a lane of its own (ProjectorLane) on a session of its own,
 * so the projections catch up in parallel, on as many PostgreSQL backends: the first lane applies
 * its pages on the lease's own session, each other one on a session opened for it. The lanes wake
 * on appends made in this process (LOG_APPENDED) and, through LISTEN, on those made in others
 * (AppendSignal), besides their own poll.
 */
@Injectable()
export class ProjectorService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(ProjectorService.name);
  private readonly loop: LeaseLoop;
  private lanes: ProjectorLane[] = [];
  private disabled = false;
  private readonly appendsElsewhere: ChannelListener;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly repository: ProjectionRepository,
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
    private readonly appendSignal: AppendSignal,
  ) {
    this.appendsElsewhere = new ChannelListener(dataSource, APPENDED_CHANNEL, this.logger);
    this.loop = new LeaseLoop(
      new AdvisoryLease(dataSource, PROJECTOR_LOCK, (runner) => repository.prepareLane(runner)),
      {
        role: 'projector',
        logger: this.logger,
        whileHeld: (runner) => this.project(runner),
      },
    );
  }

  get state(): ProjectorState {
    return this.disabled ? 'disabled' : this.loop.state;
  }

  /** The state of one projection's lane: the lease's state, or `starting` until the lane holds its own lock. */
  stateOf(projection: ProjectionName): ProjectorState {
    const lane = this.lanes.find((candidate) => candidate.projection.name === projection);
    return this.state === 'running' && lane !== undefined ? lane.state : this.state;
  }

  onApplicationBootstrap(): void {
    if (this.config.hasRole('projector')) this.loop.start();
    else this.disabled = true;
  }

  async beforeApplicationShutdown(): Promise<void> {
    const stopped = this.loop.stop();
    for (const lane of this.lanes) lane.stop();
    await stopped;
  }

  @OnEvent(LOG_APPENDED)
  onAppended(appended?: LogAppended): void {
    for (const lane of this.lanes) lane.wake(appended?.eventTypes);
  }

  /**
   * While the lease is held: every lane until the stop. A lane that fails stops the others, and the
   * failure reaches the lease loop (which releases the lease) only once every lane has ended and
   * each session opened for one has let its lock go.
   */
  private async project(runner: QueryRunner): Promise<void> {
    if (this.loop.stopping) return;
    const lanes: ProjectorLane[] = PROJECTIONS.map(
      (projection) =>
        new ProjectorLane(projection, this.repository, this.metrics, this.logger, () => {
          for (const lane of lanes) if (lane.projection !== projection) lane.wakeIfWaiting();
        }),
    );
    this.lanes = lanes;
    const stopAll = (error: unknown) => {
      for (const lane of lanes) lane.stop();
      throw error;
    };
    this.appendSignal.projectingHere = true;
    const unsubscribe = this.appendsElsewhere.subscribe((payload) => this.onAppended(appendedElsewhere(payload)));
    const ended = await Promise.allSettled(
      lanes.map((lane, index) =>
        (index === 0 ? lane.run(this.leaseSession(runner, lane)) : this.runOnOwnSession(lane)).catch(stopAll),
      ),
    ).finally(() => {
      unsubscribe();
      this.appendSignal.projectingHere = false;
    });
    const failure = ended.find((end): end is PromiseRejectedResult => end.status === 'rejected');
    if (failure !== undefined) throw failure.reason;
  }

  private leaseSession(runner: QueryRunner, lane: ProjectorLane): LaneSession {
    return { runner, tryAcquire: () => tryLock(runner, laneLock(lane.projection)) };
  }

  private async runOnOwnSession(lane: ProjectorLane): Promise<void> {
    const session = new AdvisoryLease(this.dataSource, laneLock(lane.projection), (runner) =>
      this.repository.prepareLane(runner),
    );
    try {
      await lane.run(session);
    } finally {
      await session.release();
    }
  }
}

/** The payload of an AppendSignal NOTIFY: the event types appended, comma-separated ('' when not told: every lane wakes). */
function appendedElsewhere(payload: string): LogAppended {
  return { head: 0, eventTypes: payload === '' ? undefined : payload.split(',') };
}

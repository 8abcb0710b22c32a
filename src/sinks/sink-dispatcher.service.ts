import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { ChangeLogRepository } from '../changes/change-log.repository.js';
import { ChangeNotifier } from '../changes/change-notifier.service.js';
import { LeaseLoop, LeaseState } from '../common/lease-loop.js';
import { AppConfig } from '../config/app-config.js';
import { AdvisoryLease } from '../database/advisory-lease.js';
import { MetricsService } from '../observability/metrics.service.js';
import { HttpSinkClient } from './http-sink.client.js';
import { NatsSinkClient } from './nats-sink.client.js';
import { SinkAttemptsService } from './sink-attempts.service.js';
import { SINK_DISPATCHER_LOCK, SinkLeaseRepository } from './sink-lease.repository.js';
import { SinkRepository } from './sink.repository.js';
import { planShare, sinkLeaseKey } from './sink-shares.js';
import { SinkSnapshots } from './sink-start.js';
import { SinkWorker, SinkWorkerDeps } from './sink-worker.js';
import { TableSinksClient } from './tables/table-sinks.client.js';

export { SINK_DISPATCHER_LOCK } from './sink-lease.repository.js';
/** Emitted by the sinks API when a sink was created, changed, replayed or removed. */
export const SINKS_CHANGED = 'sinks.changed';

/**
 * How often the sinks and their leases are looked at again (sinks made or changed elsewhere,
 * dispatchers come or gone): a dead dispatcher's sinks wait at most this long, after PostgreSQL
 * ended its session, and a sink changed through another process's API is read again within it.
 */
const REFRESH_MS = 500;
/** An idle worker reads its sink at least this often, whatever the wakes (a safety net). */
const IDLE_REREAD_MS = 10_000;
export type DispatcherState = LeaseState | 'disabled';

/**
 * One of the sink dispatchers of the database (every process with the `sinks` role): it holds
 * SINK_DISPATCHER_LOCK shared on a dedicated connection, and on that connection the leases of its
 * share of the sinks (planShare), one worker per sink it holds. A lease it gives up is unlocked
 * only once the sink's worker has the answer to its batch in flight, and a dead process's leases
 * end with its session: never two dispatchers on one sink, one batch in flight per sink. Cursors
 * move by compare-and-set besides, so a batch finishing during a takeover cannot move one twice.
 */
@Injectable()
export class SinkDispatcherService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(SinkDispatcherService.name);
  private readonly workers = new Map<string, SinkWorker>();
  /** The leases held on the dispatcher's connection, by key. */
  private readonly held = new Set<number>();
  /** Held leases being given up: the workers finishing their batch; a key's list empties when they have. */
  private readonly handing = new Map<number, SinkWorker[]>();
  private readonly loop: LeaseLoop;
  /** Each deliverable sink's stamp at the last look: a changed one wakes its worker to read it. */
  private stamps = new Map<string, string>();
  private unwatch: (() => void) | null = null;
  private lastShare = '';
  private disabled = false;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly repository: SinkRepository,
    private readonly leases: SinkLeaseRepository,
    private readonly changeLog: ChangeLogRepository,
    private readonly notifier: ChangeNotifier,
    private readonly snapshots: SinkSnapshots,
    private readonly http: HttpSinkClient,
    private readonly nats: NatsSinkClient,
    private readonly tables: TableSinksClient,
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
    private readonly attempts: SinkAttemptsService,
  ) {
    const lease = new AdvisoryLease(dataSource, SINK_DISPATCHER_LOCK, (runner) => leases.prepare(runner), 'shared');
    this.loop = new LeaseLoop(lease, {
      role: 'sink dispatcher',
      logger: this.logger,
      whileHeld: (runner) => this.dispatch(runner),
      afterHeld: () => this.stopWorkers(),
    });
  }

  get state(): DispatcherState {
    return this.disabled ? 'disabled' : this.loop.state;
  }

  onApplicationBootstrap(): void {
    if (this.config.hasRole('sinks')) this.loop.start();
    else this.disabled = true;
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.loop.stop();
  }

  @OnEvent(SINKS_CHANGED)
  onSinksChanged(): void {
    for (const worker of this.workers.values()) worker.wake();
    this.loop.alarm.wake();
  }

  /**
   * While a dispatcher: the sinks and leases looked at again when woken (a sink changed, a lease
   * handed on) and every REFRESH_MS; the workers woken by the change notifier (LISTEN/NOTIFY, and
   * its poll) whenever the readable head moves, not by a poll of their own.
   */
  private async dispatch(runner: QueryRunner): Promise<void> {
    const alarm = this.loop.alarm;
    try {
      while (!this.loop.stopping) {
        alarm.takeWake();
        const started = Date.now();
        await this.rebalance(runner);
        this.watchChanges(this.workers.size > 0);
        await alarm.sleep(Math.max(0, REFRESH_MS - (Date.now() - started)));
      }
    } finally {
      this.watchChanges(false);
    }
  }

  /** Has the workers woken for new changes while there are any. */
  private watchChanges(on: boolean): void {
    if (on && this.unwatch === null) {
      this.unwatch = this.notifier.watch(() => {
        for (const worker of this.workers.values()) worker.wakeForChanges();
      });
      // Changes written before the watch began wake nobody: every worker looks once more.
      for (const worker of this.workers.values()) worker.wakeForChanges();
    } else if (!on && this.unwatch !== null) {
      this.unwatch();
      this.unwatch = null;
    }
  }

  /** Gives up the leases handed on, takes or hands on leases to hold this dispatcher's share, and runs a worker per sink held. */
  private async rebalance(runner: QueryRunner): Promise<void> {
    const deliverable = await this.repository.deliverable();
    const keys = new Map(deliverable.map(({ id }) => [id, sinkLeaseKey(id)]));
    const stamps = new Map(deliverable.map(({ id, stamp }) => [id, stamp]));
    for (const [id, worker] of this.workers) {
      const before = this.stamps.get(id);
      if (before !== undefined && before !== stamps.get(id)) worker.wake();
    }
    this.stamps = stamps;
    for (const [key, finishing] of this.handing) {
      if (finishing.length > 0) continue;
      await this.leases.release(runner, key);
      this.held.delete(key);
      this.handing.delete(key);
    }
    const view = await this.leases.view(runner);
    const delivering = new Set([...this.held].filter((key) => !this.handing.has(key)));
    const plan = planShare([...keys.values()], delivering, view);
    for (const key of plan.release) this.handOn(key);
    for (let i = 0, room = plan.room; i < plan.candidates.length && room > 0; i++) {
      if (!(await this.leases.tryTake(runner, plan.candidates[i]))) continue;
      this.held.add(plan.candidates[i]);
      room--;
    }
    this.runWorkers(keys);
    this.metrics.sinkDispatchers.set(view.dispatchers);
    this.metrics.sinks.count(await this.repository.countByKindAndState());
    this.logShare(keys.size, view.dispatchers);
  }

  /** Lets the workers of a lease's sinks finish their batch in flight; the lease is unlocked at the next look after. */
  private handOn(key: number): void {
    if (this.handing.has(key)) return;
    const finishing = [...this.workers.values()].filter((worker) => sinkLeaseKey(worker.sinkId) === key);
    this.handing.set(key, finishing);
    for (const worker of finishing) {
      this.workers.delete(worker.sinkId);
      void worker.stop(true).then(() => {
        finishing.splice(finishing.indexOf(worker), 1);
        if (!this.workers.has(worker.sinkId)) this.metrics.sinks.forget(worker.sinkId);
        this.loop.alarm.wake();
      });
    }
  }

  /** A worker for each deliverable sink whose lease is held and kept; the others' workers stop. */
  private runWorkers(keys: Map<string, number>): void {
    const delivers = (key: number | undefined) => key !== undefined && this.held.has(key) && !this.handing.has(key);
    for (const [id, worker] of this.workers) {
      if (delivers(keys.get(id)) && !worker.stopped) continue;
      this.workers.delete(id);
      if (!keys.has(id)) this.metrics.sinks.forget(id);
      void worker.stop();
    }
    const deps = this.workerDeps();
    for (const [id, key] of keys)
      if (delivers(key) && !this.workers.has(id)) this.workers.set(id, new SinkWorker(id, deps));
    this.metrics.sinks.leased(this.workers.keys());
  }

  private logShare(sinks: number, dispatchers: number): void {
    const share = `${this.workers.size}/${sinks}/${dispatchers}/${this.handing.size}`;
    if (share === this.lastShare) return;
    this.lastShare = share;
    this.logger.log({
      msg: 'sink share',
      delivering: this.workers.size,
      sinks,
      dispatchers,
      handing_on: this.handing.size,
    });
  }

  private workerDeps(): SinkWorkerDeps {
    return {
      repository: this.repository,
      changeLog: this.changeLog,
      snapshots: this.snapshots,
      http: this.http,
      nats: this.nats,
      tables: this.tables,
      metrics: this.metrics,
      attempts: this.attempts,
      failingAfterMs: this.config.sinkFailingAfterMs,
      defaultTypes: this.config.changeTypes,
      idlePollMs: IDLE_REREAD_MS,
    };
  }

  /** At the stop or when the dispatcher's connection failed (its leases gone with it): every worker cut short. */
  private async stopWorkers(): Promise<void> {
    const workers = [...this.workers.values(), ...[...this.handing.values()].flat()];
    this.workers.clear();
    this.handing.clear();
    this.held.clear();
    this.stamps.clear();
    this.lastShare = '';
    await Promise.all(workers.map((worker) => worker.stop()));
    this.metrics.sinks.clear();
    this.metrics.sinkDispatchers.set(0);
    await this.attempts.flush();
  }
}

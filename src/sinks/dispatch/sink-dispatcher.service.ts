import { ActivityCounter } from '../../activity/activity-counter.service.js';
import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { ChangeLogRepository } from '../../changes/change-log.repository.js';
import { ChangeNotifier } from '../../changes/change-notifier.service.js';
import { ChangeRouter } from '../../changes/change-router.service.js';
import { LeaseLoop, LeaseState } from '../../common/lease-loop.js';
import { AppConfig } from '../../config/app-config.js';
import { Limiter } from '../../common/limiter.js';
import { AdvisoryLease } from '../../database/advisory-lease.js';
import { ChannelListener } from '../../database/channel-listener.js';
import { MetricsService } from '../../observability/metrics.service.js';
import { HttpSinkClient } from '../http/http-sink.client.js';
import { NatsSinkClient } from '../nats/nats-sink.client.js';
import { SinkAttemptsService } from '../attempts/sink-attempts.service.js';
import { SINK_DISPATCHER_LOCK, SinkLeaseRepository } from './sink-lease.repository.js';
import { SinkRepository } from '../sink.repository.js';
import { SinkWrites } from '../sink-writes.js';
import { planShare, sinkLeaseKey } from './sink-shares.js';
import { SinkSnapshots } from '../sink-start.js';
import { SinkWorker } from './sink-worker.js';
import type { SinkWorkerDeps } from './sink-worker-deps.js';
import { TableSinksClient } from '../tables/table-sinks.client.js';

export { SINK_DISPATCHER_LOCK } from './sink-lease.repository.js';
/** Emitted by the sinks API with a sink's id when it was created, changed, replayed or removed. */
export const SINKS_CHANGED = 'sinks.changed';
/** Notified with a sink's id by every transaction that makes, changes or removes it (a trigger on `sinks`). */
const SINKS_CHANNEL = 'menu_sync_sinks';

/**
 * How often the leases are looked at again (dispatchers come or gone): a dead dispatcher's sinks
 * wait at most this long, after PostgreSQL ended its session. Sinks are read one by one when they
 * change (SINKS_CHANNEL), all of them only every FULL_READ_MS (what a lost LISTEN connection missed).
 */
const REFRESH_MS = 500;
const FULL_READ_MS = 30_000;
/** How often the sinks are counted by kind and state for their gauges. */
const COUNT_FAILING_MS = 2_000;
/** An idle worker reading on its own reads its sink at least this often, whatever the wakes (a safety net). */
const IDLE_REREAD_MS = 10_000;
/** A sink following the shared read has its cursor written forward at least this often (far inside CHANGES_RETENTION). */
const IDLE_CURSOR_MS = 3_600_000;
/** How often the workers following the shared read are looked at for that. */
const IDLE_NUDGE_MS = 60_000;
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
  /** Each deliverable sink's stamp and lease at the last look: a changed one wakes its worker to read it. */
  private sinks = new Map<string, { stamp: string; key: number }>();
  /** Sinks told changed since: read again at the next look. */
  private readonly dirty = new Set<string>();
  private fullReadAt = 0;
  private failingCountedAt = 0;
  /** What the workers were last run for: sinks read, leases held and handed on. */
  private ranFor = '';
  /** Sinks read changed since the workers were last run for them; the sinks of each bucket. */
  private readonly changed = new Set<string>();
  private readonly buckets = new Map<number, number>();
  /** The workers reading on their own (the others follow the shared read, which wakes them): woken when the head moves. */
  private readonly reading = new Set<SinkWorker>();
  private readonly listener: ChannelListener;
  /** The workers' statements on the shared pool, at most half its connections at once (SinkWorkerDeps.db). */
  private readonly db: Limiter;
  private unlisten: (() => void) | null = null;
  private unwatch: (() => void) | null = null;
  private lastShare = '';
  private disabled = false;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly repository: SinkRepository,
    private readonly writes: SinkWrites,
    private readonly leases: SinkLeaseRepository,
    private readonly changeLog: ChangeLogRepository,
    private readonly notifier: ChangeNotifier,
    private readonly router: ChangeRouter,
    private readonly snapshots: SinkSnapshots,
    private readonly http: HttpSinkClient,
    private readonly nats: NatsSinkClient,
    private readonly tables: TableSinksClient,
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
    private readonly attempts: SinkAttemptsService,
    private readonly activity: ActivityCounter,
  ) {
    this.listener = new ChannelListener(dataSource, SINKS_CHANNEL, this.logger);
    this.db = new Limiter(Math.max(2, Math.floor(config.DATABASE_POOL_SIZE / 2)));
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

  /** A sink of this process's API changed: its worker reads it now (the notification comes too, a little later). */
  @OnEvent(SINKS_CHANGED)
  onSinksChanged(id: string): void {
    this.sinkChanged(id);
  }

  private sinkChanged(id: string): void {
    this.workers.get(id)?.wake();
    this.dirty.add(id);
    this.loop.alarm.wake();
  }

  /**
   * While a dispatcher: the sinks and leases looked at again when woken (a sink changed, a lease
   * handed on) and every REFRESH_MS; the workers woken by the change notifier (LISTEN/NOTIFY, and
   * its poll) whenever the readable head moves, not by a poll of their own.
   */
  private async dispatch(runner: QueryRunner): Promise<void> {
    const alarm = this.loop.alarm;
    let nudged = Date.now();
    this.fullReadAt = 0;
    this.unlisten = this.listener.subscribe((id) => (id === '' ? undefined : this.sinkChanged(id)));
    try {
      while (!this.loop.stopping) {
        alarm.takeWake();
        const started = Date.now();
        await this.rebalance(runner);
        this.watchChanges(this.workers.size > 0);
        if (started - nudged > IDLE_NUDGE_MS) {
          nudged = started;
          for (const worker of this.workers.values()) worker.nudgeIdle(started);
        }
        await alarm.sleep(Math.max(0, REFRESH_MS - (Date.now() - started)));
      }
    } finally {
      this.watchChanges(false);
      this.unlisten?.();
      this.unlisten = null;
    }
  }

  /** Has the workers woken for new changes while there are any. */
  private watchChanges(on: boolean): void {
    if (on && this.unwatch === null) {
      this.unwatch = this.notifier.watch(() => {
        for (const worker of this.reading) worker.wakeForChanges();
      });
      // Changes written before the watch began wake nobody: every worker looks once more.
      for (const worker of this.workers.values()) worker.wakeForChanges();
    } else if (!on && this.unwatch !== null) {
      this.unwatch();
      this.unwatch = null;
    }
  }

  /**
   * Reads the sinks told changed (every sink only every FULL_READ_MS), gives up the leases handed
   * on, takes or hands on leases to hold this dispatcher's share, and runs a worker per sink held.
   */
  private async rebalance(runner: QueryRunner): Promise<void> {
    await this.readSinks();
    for (const [key, finishing] of this.handing) {
      if (finishing.length > 0) continue;
      await this.leases.release(runner, key);
      this.held.delete(key);
      this.handing.delete(key);
    }
    const view = await this.leases.view(runner);
    if (view.olderDispatchers > 0 && this.lastShare !== 'older')
      this.logger.warn({
        msg: 'a sink dispatcher of an older version (a lease per sink) is running: this one delivers nothing until it stops',
        older_dispatchers: view.olderDispatchers,
      });
    const delivering = new Set([...this.held].filter((key) => !this.handing.has(key)));
    const plan = planShare([...this.buckets.keys()], delivering, view);
    for (const key of plan.release) this.handOn(key);
    for (let i = 0, room = plan.room; i < plan.candidates.length && room > 0; i++) {
      if (!(await this.leases.tryTake(runner, plan.candidates[i]))) continue;
      this.held.add(plan.candidates[i]);
      room--;
    }
    const ranFor = `${[...this.held].join()}/${[...this.handing.keys()].join()}`;
    const changed = [...this.changed];
    this.changed.clear();
    if (ranFor !== this.ranFor) {
      this.ranFor = ranFor;
      this.runWorkers([...this.workers.keys(), ...this.sinks.keys()]);
    } else if (changed.length > 0) this.runWorkers(changed);
    this.metrics.sinkDispatchers.set(view.dispatchers);
    if (Date.now() - this.failingCountedAt > COUNT_FAILING_MS) {
      this.failingCountedAt = Date.now();
      this.metrics.sinks.count(await this.repository.countByKindAndState());
    }
    this.logShare(this.sinks.size, view.dispatchers, view.olderDispatchers);
  }

  /** Every sink every FULL_READ_MS, else those told changed; a changed sink's worker is woken to read it. */
  private async readSinks(): Promise<void> {
    const full = Date.now() - this.fullReadAt > FULL_READ_MS;
    if (!full && this.dirty.size === 0) return;
    const ids = [...this.dirty];
    this.dirty.clear();
    const rows = full ? await this.repository.deliverable() : await this.repository.deliverableOf(ids);
    const read = new Map(rows.map(({ id, stamp }) => [id, stamp]));
    if (full) this.fullReadAt = Date.now();
    for (const id of full ? new Set([...this.sinks.keys(), ...read.keys()]) : ids) {
      const before = this.sinks.get(id);
      const stamp = read.get(id);
      // A worker that stopped by itself is looked at again even when its sink did not change.
      if (before?.stamp === stamp && this.workers.get(id)?.stopped !== true) continue;
      this.changed.add(id);
      if (before?.stamp === stamp) continue;
      if (before !== undefined) this.count(before.key, -1);
      if (stamp === undefined) this.sinks.delete(id);
      else {
        const key = before?.key ?? sinkLeaseKey(id);
        this.sinks.set(id, { stamp, key });
        this.count(key, 1);
      }
      if (before !== undefined) this.workers.get(id)?.wake();
    }
  }

  /** Keeps the number of sinks of each bucket: the leases wanted are the buckets with any. */
  private count(key: number, by: 1 | -1): void {
    const n = (this.buckets.get(key) ?? 0) + by;
    if (n > 0) this.buckets.set(key, n);
    else this.buckets.delete(key);
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

  /**
   * For each sink of `ids`: a worker if it is deliverable and its lease held and kept, else none
   * (every sink when the leases changed, else only those read changed).
   */
  private runWorkers(ids: Iterable<string>): void {
    const delivers = (key: number | undefined) => key !== undefined && this.held.has(key) && !this.handing.has(key);
    const deps = this.workerDeps();
    for (const id of new Set(ids)) {
      const worker = this.workers.get(id);
      const wanted = delivers(this.sinks.get(id)?.key);
      if (worker !== undefined && wanted && !worker.stopped) continue;
      if (worker !== undefined) {
        this.workers.delete(id);
        void worker.stop();
      }
      if (wanted) this.workers.set(id, new SinkWorker(id, deps));
      this.metrics.sinks.delivering(id, wanted);
    }
  }

  private logShare(sinks: number, dispatchers: number, older: number): void {
    if (older > 0) {
      this.lastShare = 'older';
      return;
    }
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
      writes: this.writes,
      db: this.db,
      changeLog: this.changeLog,
      router: this.router,
      snapshots: this.snapshots,
      http: this.http,
      nats: this.nats,
      tables: this.tables,
      metrics: this.metrics,
      attempts: this.attempts,
      activity: this.activity,
      failingAfterMs: this.config.sinkFailingAfterMs,
      defaultTypes: this.config.changeTypes,
      idlePollMs: IDLE_REREAD_MS,
      idleCursorMs: Math.min(IDLE_CURSOR_MS, this.config.changesRetentionMs / 4),
      // A worker that stopped by itself (its sink gone or disabled): its sink is read again.
      stopped: (id) => this.sinkChanged(id),
      reading: (worker, on) => (on ? this.reading.add(worker) : this.reading.delete(worker)),
    };
  }

  /** At the stop or when the dispatcher's connection failed (its leases gone with it): every worker cut short. */
  private async stopWorkers(): Promise<void> {
    const workers = [...this.workers.values(), ...[...this.handing.values()].flat()];
    this.workers.clear();
    this.handing.clear();
    this.held.clear();
    this.sinks.clear();
    this.buckets.clear();
    this.reading.clear();
    this.changed.clear();
    this.dirty.clear();
    this.ranFor = '';
    this.lastShare = '';
    await Promise.all(workers.map((worker) => worker.stop()));
    this.metrics.sinks.clear();
    this.metrics.sinkDispatchers.set(0);
    await this.attempts.flush();
  }
}

import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { ChangeLogRepository } from '../changes/change-log.repository.js';
import { LeaseLoop, LeaseState } from '../common/lease-loop.js';
import { AppConfig } from '../config/app-config.js';
import { AdvisoryLease } from '../database/advisory-lease.js';
import { advisoryLocks } from '../database/advisory-locks.js';
import { MetricsService } from '../observability/metrics.service.js';
import { HttpSinkClient } from './http-sink.client.js';
import { NatsSinkClient } from './nats-sink.client.js';
import { SinkAttemptsService } from './sink-attempts.service.js';
import { SinkRepository } from './sink.repository.js';
import { SinkSnapshots } from './sink-start.js';
import { SinkWorker, SinkWorkerDeps } from './sink-worker.js';
import { TableSinksClient } from './tables/table-sinks.client.js';

/** Any constant: one dispatcher per database (docs/reference.md §11). */
export const SINK_DISPATCHER_LOCK = advisoryLocks.single('sinkDispatcher');
/** Emitted by the sinks API when a sink was created, changed, replayed or removed. */
export const SINKS_CHANGED = 'sinks.changed';

/** How often the head of the change log is looked at while there are sinks (new changes wake their workers). */
const HEAD_POLL_MS = 50;
/** How often the list of sinks is read again (sinks made through another daemon). */
const REFRESH_MS = 1000;
export type DispatcherState = LeaseState;

/**
 * Holds the dispatcher lock on a dedicated connection, as the projector does: while it is held
 * this daemon runs one worker per deliverable sink; when the connection dies the workers stop
 * and a standby daemon polling for the lock takes over. Cursors move by compare-and-set, so even
 * a worker finishing its last batch during a takeover cannot move a cursor twice.
 */
@Injectable()
export class SinkDispatcherService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(SinkDispatcherService.name);
  private readonly workers = new Map<string, SinkWorker>();
  private readonly loop: LeaseLoop;
  private lastHead = -1;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly repository: SinkRepository,
    private readonly changeLog: ChangeLogRepository,
    private readonly snapshots: SinkSnapshots,
    private readonly http: HttpSinkClient,
    private readonly nats: NatsSinkClient,
    private readonly tables: TableSinksClient,
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
    private readonly attempts: SinkAttemptsService,
  ) {
    this.loop = new LeaseLoop(new AdvisoryLease(dataSource, SINK_DISPATCHER_LOCK), {
      role: 'sink dispatcher',
      logger: this.logger,
      whileHeld: (runner) => this.dispatch(runner),
      afterHeld: () => this.stopWorkers(),
    });
  }

  get state(): DispatcherState {
    return this.loop.state;
  }

  onApplicationBootstrap(): void {
    this.loop.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.loop.stop();
  }

  @OnEvent(SINKS_CHANGED)
  onSinksChanged(): void {
    for (const worker of this.workers.values()) worker.wake();
    this.loop.alarm.wake();
  }

  /** While the lease is held: the sinks read again when woken (a sink changed) and every REFRESH_MS. */
  private async dispatch(runner: QueryRunner): Promise<void> {
    const alarm = this.loop.alarm;
    let refreshedAt = 0;
    while (!this.loop.stopping) {
      if (alarm.takeWake() || Date.now() - refreshedAt >= REFRESH_MS) {
        refreshedAt = Date.now();
        await runner.query('SELECT 1');
        await this.refresh();
      }
      if (this.workers.size > 0) {
        await this.wakeOnNewChanges();
        await alarm.sleep(HEAD_POLL_MS);
      } else {
        // No sink, nobody to wake: the next look is the next refresh (or a sink made here, which wakes this).
        await alarm.sleep(Math.max(0, REFRESH_MS - (Date.now() - refreshedAt)));
      }
    }
  }

  /** Starts a worker for each deliverable sink without one, stops those of sinks gone or disabled. */
  private async refresh(): Promise<void> {
    const ids = new Set(await this.repository.deliverableIds());
    for (const [id, worker] of this.workers) {
      if (!ids.has(id) || worker.stopped) {
        this.workers.delete(id);
        if (!ids.has(id)) this.metrics.sinkLag.remove({ sink: id });
        void worker.stop();
      }
    }
    const deps = this.workerDeps();
    for (const id of ids) if (!this.workers.has(id)) this.workers.set(id, new SinkWorker(id, deps));
    this.metrics.sinksFailing.set(await this.repository.countFailing());
  }

  private async wakeOnNewChanges(): Promise<void> {
    const head = await this.changeLog.head();
    if (head === this.lastHead) return;
    this.lastHead = head;
    for (const worker of this.workers.values()) worker.wake();
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
      idlePollMs: 1000,
    };
  }

  private async stopWorkers(): Promise<void> {
    const workers = [...this.workers.values()];
    this.workers.clear();
    await Promise.all(workers.map((worker) => worker.stop()));
    await this.attempts.flush();
  }
}

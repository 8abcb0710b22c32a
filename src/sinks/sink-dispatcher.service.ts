import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ChangeLogRepository } from '../changes/change-log.repository.js';
import { AppConfig } from '../config/app-config.js';
import { AdvisoryLease } from '../database/advisory-lease.js';
import { advisoryLocks } from '../database/advisory-locks.js';
import { MetricsService } from '../observability/metrics.service.js';
import { HttpSinkClient } from './http-sink.client.js';
import { NatsSinkClient } from './nats-sink.client.js';
import { SinkRepository } from './sink.repository.js';
import { SinkWorker, SinkWorkerDeps } from './sink-worker.js';
import { TableSinksClient } from './tables/table-sinks.client.js';

/** Any constant: one dispatcher per database (CONTRACT §11). */
export const SINK_DISPATCHER_LOCK = advisoryLocks.single('sinkDispatcher');
/** Emitted by the sinks API when a sink was created, changed, replayed or removed. */
export const SINKS_CHANGED = 'sinks.changed';

/** How often the head of the change log is looked at while there are sinks (new changes wake their workers). */
const HEAD_POLL_MS = 50;
/** How often the list of sinks is read again (sinks made through another daemon). */
const REFRESH_MS = 1000;
const STANDBY_POLL_MS = 2000;
const RETRY_MS = 1000;

export type DispatcherState = 'starting' | 'running' | 'standby' | 'stopped' | 'failing';

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
  private readonly lease: AdvisoryLease;
  private stopping = false;
  private loop?: Promise<void>;
  private wakeUp?: () => void;
  private refreshRequested = true;
  private lastHead = -1;
  state: DispatcherState = 'starting';

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly repository: SinkRepository,
    private readonly changeLog: ChangeLogRepository,
    private readonly http: HttpSinkClient,
    private readonly nats: NatsSinkClient,
    private readonly tables: TableSinksClient,
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
  ) {
    this.lease = new AdvisoryLease(dataSource, SINK_DISPATCHER_LOCK);
  }

  onApplicationBootstrap(): void {
    this.loop = this.run();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.wakeUp?.();
    await this.loop;
    this.state = 'stopped';
  }

  @OnEvent(SINKS_CHANGED)
  onSinksChanged(): void {
    this.refreshRequested = true;
    for (const worker of this.workers.values()) worker.wake();
    this.wakeUp?.();
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
        let refreshedAt = 0;
        while (!this.stopping) {
          if (this.refreshRequested || Date.now() - refreshedAt >= REFRESH_MS) {
            this.refreshRequested = false;
            refreshedAt = Date.now();
            await this.lease.runner!.query('SELECT 1');
            await this.refresh();
          }
          if (this.workers.size > 0) {
            await this.wakeOnNewChanges();
            await this.sleep(HEAD_POLL_MS);
          } else {
            // No sink, nobody to wake: the next look is the next refresh (or a sink made here, which wakes this).
            await this.sleep(Math.max(0, REFRESH_MS - (Date.now() - refreshedAt)));
          }
        }
      } catch (error) {
        this.state = 'failing';
        this.logger.error({ msg: 'sink dispatcher failed; retrying', err: error });
        await this.stopWorkers();
        await this.release();
        await this.sleep(RETRY_MS);
      }
    }
    await this.stopWorkers();
    await this.release();
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
      http: this.http,
      nats: this.nats,
      tables: this.tables,
      metrics: this.metrics,
      failingAfterMs: this.config.sinkFailingAfterMs,
      defaultTypes: this.config.changeTypes,
      idlePollMs: 1000,
    };
  }

  private async stopWorkers(): Promise<void> {
    const workers = [...this.workers.values()];
    this.workers.clear();
    await Promise.all(workers.map((worker) => worker.stop()));
  }

  private async acquire(): Promise<boolean> {
    const locked = await this.lease.tryAcquire();
    if (locked) this.logger.log('this daemon is the active sink dispatcher');
    return locked;
  }

  private release(): Promise<void> {
    return this.lease.release();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeUp = done;
    });
  }
}

import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { SchedulerRegistry } from '@nestjs/schedule';
import { CronJob } from 'cron';
import { CONNECTION_CREATED } from '../oauth/connect.service.js';
import { AppConfig } from '../config/app-config.js';
import type { ReconcileRun } from './reconcile-report.js';
import { ReconcileFilter, ReconcileService } from './reconcile.service.js';

const JOB = 'reconcile';
/** On shutdown, a run in progress gets this long to finish before the modules close under it. */
const SHUTDOWN_WAIT_MS = 5000;

/**
 * When reconcile runs in the daemon with RECONCILE_CRON set (unset, ReconcileSpread schedules it):
 * on RECONCILE_CRON (`off`: never) in a process with the
 * `reconcile` role, and once right after a connection is made, in the process that made it (a new
 * account should not wait for the next tick). Runs in this process queue one after another; a tick while a scheduled run
 * still waits in the queue is dropped, so ticks cannot pile up behind runs longer than the
 * interval (connection-triggered runs always queue). A run that finds another process's run in
 * progress reports `skipped` at once: waiting for it would hold the daemon's shutdown (commands
 * wait instead, see `menu-sync reconcile --wait`).
 */
@Injectable()
export class ReconcileScheduler implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(ReconcileScheduler.name);
  private queue: Promise<unknown> = Promise.resolve();
  private stopping = false;
  /** A scheduled run is queued and has not started yet. */
  private scheduledWaiting = false;

  constructor(
    private readonly reconcile: ReconcileService,
    private readonly registry: SchedulerRegistry,
    private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    if (this.config.reconcileSchedule.mode !== 'cron' || !this.config.hasRole('reconcile')) return;
    const job = CronJob.from({
      cronTime: this.config.RECONCILE_CRON!,
      onTick: () => void this.onSchedule(),
      start: true,
    });
    this.registry.addCronJob(JOB, job as never);
    this.logger.log(`reconcile scheduled: ${this.config.RECONCILE_CRON}`);
  }

  /** A tick of RECONCILE_CRON: queues a run unless a scheduled one is still waiting (then undefined). */
  onSchedule(): Promise<ReconcileRun | undefined> | undefined {
    if (this.scheduledWaiting) {
      this.logger.debug('reconcile tick dropped: the previous scheduled run has not started yet');
      return undefined;
    }
    this.scheduledWaiting = true;
    return this.enqueue('schedule');
  }

  @OnEvent(CONNECTION_CREATED)
  onConnected({ connectionId }: { connectionId: number }): void {
    // The spread schedule reconciles a new connection's stores first, in the processes sharing them.
    if (this.config.reconcileSchedule.mode === 'spread') return;
    void this.enqueue('connection', { connectionId });
  }

  /** Runs after whatever run is queued before it; resolves with its report (undefined when stopping or failed). */
  enqueue(trigger: string, filter: ReconcileFilter = {}): Promise<ReconcileRun | undefined> {
    const next = this.queue.then(async () => {
      if (trigger === 'schedule') this.scheduledWaiting = false;
      if (this.stopping) return undefined;
      try {
        return await this.reconcile.run(trigger, filter);
      } catch (error) {
        this.logger.error({ msg: 'reconcile run failed', err: error });
        return undefined;
      }
    });
    this.queue = next;
    return next;
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    if (this.registry.doesExist('cron', JOB)) this.registry.deleteCronJob(JOB);
    await Promise.race([this.queue, new Promise((resolve) => setTimeout(resolve, SHUTDOWN_WAIT_MS).unref())]);
  }
}

import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import type { Connection } from '../connections/connection.js';
import { ConnectionRepository } from '../connections/connection.repository.js';
import { MetricsService } from '../observability/metrics.service.js';
import { ConnectionReconciler } from './connection.reconciler.js';
import type { ConnectionPlan } from './connection.reconciler.js';
import { isOperationalFault } from './operational-fault.js';
import { ProjectionCatchUp } from './projection-catch-up.js';
import { ReconcilePass } from './reconcile-pass.js';
import type { PassOptions } from './reconcile-pass.js';
import type { ReconcileRun, RunContext, RunOutcome } from './reconcile-report.js';
import { ReconcileRepository } from './reconcile.repository.js';
import { StoreSchedule } from './store-schedule.js';

export interface ReconcileFilter {
  connectionId?: number;
  storeId?: string;
}

export interface RunOptions {
  /** How long to wait for a run in progress (in any process) before reporting `skipped`; 0: not at all. */
  waitMs?: number;
}

/**
 * Heals what webhooks missed (docs/reference.md §8): with the projector caught up and parked events
 * retried, the stores of every active connection are reconciled (ConnectionReconciler plans each
 * connection, ReconcilePass fetches the stores concurrently, compares them with the mirror of
 * their owner and appends every difference to the log as a `reconcile` event), so the log stays
 * the truth and a replay reproduces the healed state. This is the run and its report: one run at a
 * time, a fault in one connection's or store's work reported while the others go on, every run
 * saved. Only a bug (see isOperationalFault) throws, after its run was saved as failed.
 */
@Injectable()
export class ReconcileService {
  private readonly logger = new Logger(ReconcileService.name);

  constructor(
    private readonly connections: ConnectionRepository,
    private readonly reconciler: ConnectionReconciler,
    private readonly pass: ReconcilePass,
    private readonly repository: ReconcileRepository,
    private readonly catchUp: ProjectionCatchUp,
    private readonly metrics: MetricsService,
    private readonly schedule: StoreSchedule,
  ) {}

  async run(trigger: string, filter: ReconcileFilter = {}, { waitMs = 0 }: RunOptions = {}): Promise<ReconcileRun> {
    // The span of the run's work, in the lock: runs never overlap in their reports.
    let startedAt = new Date();
    let finishedAt: Date | undefined;
    const context: RunContext = { runId: randomUUID(), errors: [], notes: [], stores: [], notOwned: [] };
    let outcome: RunOutcome | undefined;
    let bug: { error: unknown } | undefined;
    try {
      const work = async (waitedMs: number) => {
        startedAt = new Date();
        if (waitedMs > 0) context.notes.push(`waited ${formatSeconds(waitedMs)} s for the run in progress`);
        try {
          return await this.reconcileAll(context, filter);
        } finally {
          finishedAt = new Date();
        }
      };
      if ((await this.repository.exclusively(work, waitMs)) === undefined) {
        outcome = 'skipped';
        context.errors.push(
          waitMs > 0
            ? `another reconcile run was still in progress after ${formatSeconds(waitMs)} s of waiting`
            : 'another reconcile run is in progress',
        );
      }
    } catch (error) {
      outcome = 'failed';
      context.errors.push(`the run stopped: ${messageOf(error)}`);
      if (!isOperationalFault(error)) {
        bug = { error };
        this.logger.error({ msg: 'reconcile run stopped by an unexpected error', err: error });
      }
    }
    return this.finish(trigger, context, startedAt, finishedAt ?? new Date(), outcome, bug);
  }

  /**
   * One batch of the spread schedule (docs/reference.md §13): the stores of `plans`, fetched once
   * each (the schedule retries later), alongside the batches of other processes but never during
   * a run; undefined when a run holds the reconcile lock (or waits for it), or when no store was
   * settled (all left for the lease's next holder).
   */
  async runBatch(trigger: string, plans: ConnectionPlan[], options: PassOptions): Promise<ReconcileRun | undefined> {
    const startedAt = new Date();
    const context: RunContext = { runId: randomUUID(), errors: [], notes: [], stores: [], notOwned: [] };
    let outcome: RunOutcome | undefined;
    let bug: { error: unknown } | undefined;
    try {
      const ran = await this.repository.alongside(async () => {
        await this.catchUpProjections(context);
        await this.pass.run(plans, context, { retries: { attempts: 1, baseDelayMs: 0 }, ...options });
        return true;
      });
      if (ran === undefined) return undefined;
    } catch (error) {
      outcome = 'failed';
      context.errors.push(`the batch stopped: ${messageOf(error)}`);
      if (!isOperationalFault(error)) bug = { error };
    }
    if (bug === undefined && context.stores.length === 0 && context.errors.length === 0) {
      await this.recordGuarded(context, startedAt);
      return undefined;
    }
    return this.finish(trigger, context, startedAt, new Date(), outcome, bug);
  }

  /** Records the run's stores in the schedule, saves the run, counts and logs it; throws a bug after that. */
  private async finish(
    trigger: string,
    context: RunContext,
    startedAt: Date,
    finishedAt: Date,
    outcome: RunOutcome | undefined,
    bug: { error: unknown } | undefined,
  ): Promise<ReconcileRun> {
    // Recorded first: a run that is listed has its stores' outcomes in the progress already.
    await this.recordGuarded(context, startedAt);
    const run = await this.repository.saveRun({
      trigger,
      started_at: startedAt.toISOString(),
      finished_at: finishedAt.toISOString(),
      outcome: outcome ?? outcomeOf(context),
      stores: context.stores,
      errors: context.errors,
      notes: context.notes,
    });
    this.metrics.reconcileRuns.inc({ outcome: run.outcome });
    this.logger.log({
      msg: `reconcile ${run.outcome}`,
      run: run.id,
      trigger,
      appended: run.stores.reduce((sum, store) => sum + store.events_appended, 0),
      errors: [...run.errors, ...run.stores.flatMap((store) => store.errors)],
    });
    if (bug !== undefined) throw bug.error;
    return run;
  }

  /** The schedule learns what the run did; a fault doing so is logged (the stores stay due), not the run's. */
  private async recordGuarded(context: RunContext, startedAt: Date): Promise<void> {
    try {
      await this.schedule.record(context, startedAt.getTime());
    } catch (error) {
      if (!isOperationalFault(error)) throw error;
      this.logger.warn({ msg: 'the reconcile schedule could not record a run', err: error });
    }
  }

  private async reconcileAll(context: RunContext, filter: ReconcileFilter): Promise<true> {
    await this.catchUpProjections(context);
    const connections = (await this.connections.list()).filter(
      (connection) => filter.connectionId === undefined || connection.id === filter.connectionId,
    );
    if (connections.length === 0 && filter.connectionId !== undefined)
      context.errors.push(`no connection ${filter.connectionId}`);
    if (connections.length === 0 && filter.connectionId === undefined)
      context.notes.push('no connection yet: nothing to reconcile');
    const plans: ConnectionPlan[] = [];
    for (const connection of connections) {
      if (connection.state !== 'active') {
        // A known state, shown by /api/v1/connections: not a fault of this run.
        context.notes.push(`connection ${connection.id}: ${connection.state}, skipped`);
        continue;
      }
      const plan = await this.planGuarded(connection, filter.storeId, context);
      if (plan !== null) plans.push(plan);
    }
    await this.pass.run(plans, context);
    const storeFilter = filter.storeId;
    const active = connections.some((connection) => connection.state === 'active');
    if (
      storeFilter !== undefined &&
      active &&
      context.errors.length === 0 &&
      !context.stores.some((store) => store.store_id === storeFilter)
    ) {
      context.errors.push(`store ${storeFilter}: no connection's owner has it`);
    }
    return true;
  }

  /** One connection's owner and stores; a fault learning them is reported on the run, and the run goes on. */
  private async planGuarded(
    connection: Connection,
    storeFilter: string | undefined,
    context: RunContext,
  ): Promise<ConnectionPlan | null> {
    try {
      return await this.reconciler.plan(connection, storeFilter, context);
    } catch (error) {
      if (!isOperationalFault(error)) throw error;
      this.logger.warn({ msg: 'reconcile of a connection failed', connection: connection.id, err: error });
      context.errors.push(`connection ${connection.id}: reconcile stopped: ${messageOf(error)}; nothing appended`);
      return null;
    }
  }

  private async catchUpProjections(context: RunContext): Promise<void> {
    try {
      const caughtUp = await this.catchUp.catchUpAndRetryParked();
      context.errors.push(...caughtUp.errors);
      context.notes.push(...caughtUp.notes);
    } catch (error) {
      if (!isOperationalFault(error)) throw error;
      context.errors.push(`catching the projections up failed: ${messageOf(error)}; compared with what they have`);
    }
  }
}

function outcomeOf(context: RunContext): RunOutcome {
  const clean = context.stores.filter((store) => store.errors.length === 0).length;
  if (context.errors.length === 0 && clean === context.stores.length) return 'ok';
  return clean > 0 ? 'partial' : 'failed';
}

function formatSeconds(ms: number): string {
  return String(Math.round(ms / 100) / 10);
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 500);
}

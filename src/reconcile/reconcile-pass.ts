import { Inject, Injectable, Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { AppConfig } from '../config/app-config.js';
import { ReauthorizationRequiredError } from '../upstream/upstream.errors.js';
import { ConnectionReconciler } from './connection.reconciler.js';
import type { ConnectionPlan } from './connection.reconciler.js';
import { isOperationalFault } from './operational-fault.js';
import { emptyStoreReport } from './reconcile-report.js';
import type { RunContext, StoreReport } from './reconcile-report.js';
import { SnapshotFetcher, StoreNotOfConnectionError } from './snapshot.fetcher.js';
import type { StoreSnapshot } from './snapshot.fetcher.js';
import { StoreQueue } from './store-queue.js';
import type { QueuedStore } from './store-queue.js';

/** How a pass tries a failing store again; injectable so that tests run with short waits. */
export interface StoreRetries {
  /** Attempts at one store's snapshot within a pass, the first included. */
  attempts: number;
  /** The wait before a store is tried again: half to all of this, doubled at each attempt. */
  baseDelayMs: number;
}

export const DEFAULT_STORE_RETRIES: StoreRetries = { attempts: 3, baseDelayMs: 5000 };

/** Provides `StoreRetries`. */
export const STORE_RETRIES = Symbol('STORE_RETRIES');

/** A store's snapshot did not come within RECONCILE_STORE_TIMEOUT. */
export class StoreTimeoutError extends Error {
  constructor(seconds: number) {
    super(`no snapshot within ${seconds} s`);
  }
}

/** The pass was stopped (the process stops, or its reconcile leases ended): its stores are left for later, unreported. */
export class PassStoppedError extends Error {
  constructor() {
    super('the pass was stopped');
  }
}

/** What a batch of the spread schedule asks of a pass besides the plans. */
export interface PassOptions {
  /** Instead of the daemon's StoreRetries. */
  retries?: StoreRetries;
  /**
   * Asked before each attempt at a store: null leaves the store out of the pass (its lease is being
   * handed on); else the attempt goes on, and the function returned is called once its fetch is over.
   */
  claim?: (connectionId: number, storeId: string) => (() => void) | null;
  /** Fired: the fetches under way stop, and the stores not settled are left unreported. */
  signal?: AbortSignal;
}

/** A connection's share of the pass. */
interface Group {
  index: number;
  plan: ConnectionPlan;
  reports: Map<string, StoreReport>;
  /** Stores whose first attempt has not ended: the connection is applied once there are none. */
  firstRound: number;
  /** The snapshots of the first round, applied together. */
  snapshots: StoreSnapshot[];
  /** Stores that answered 403/404: not the owner's. */
  foreign: Set<string>;
  applied: boolean;
  /** The claims (PassOptions.claim) of the stores whose snapshots wait for the first round's comparison. */
  releases: Array<() => void>;
  stopped: boolean;
}

/**
 * The fetching part of a reconcile run (docs/reference.md §13): the stores of every connection
 * are fetched by RECONCILE_CONCURRENCY workers at once, each with one request in flight (the
 * upstream client keeps each connection within its rate budget). A connection is compared and
 * appended once each of its stores has had its first attempt, one connection at a time; a store that hangs past
 * RECONCILE_STORE_TIMEOUT or fails is reported, and tried again later with backoff (at most
 * StoreRetries.attempts in all) while the others go on; when it comes then, it is compared by itself,
 * destroying nothing unless it is the owner's only store.
 */
@Injectable()
export class ReconcilePass {
  private readonly logger = new Logger(ReconcilePass.name);
  /** The comparisons and appends of a pass go one at a time: the workers fetch; the database pool is the daemon's too. */
  private applying: Promise<void> = Promise.resolve();

  constructor(
    private readonly fetcher: SnapshotFetcher,
    private readonly reconciler: ConnectionReconciler,
    private readonly config: AppConfig,
    @Inject(STORE_RETRIES) private readonly retries: StoreRetries,
  ) {}

  async run(plans: ConnectionPlan[], context: RunContext, options: PassOptions = {}): Promise<void> {
    const retries = options.retries ?? this.retries;
    const groups = plans.map((plan, index): Group => {
      const reports = new Map(
        plan.storeIds.map((storeId) => [storeId, emptyStoreReport(plan.connection.id, storeId, plan.owner)]),
      );
      const firstRound = plan.storeIds.length;
      return {
        index,
        plan,
        reports,
        firstRound,
        snapshots: [],
        foreign: new Set(),
        applied: false,
        stopped: false,
        releases: [],
      };
    });
    const queue = new StoreQueue(groups.map((group) => ({ group, storeIds: group.plan.storeIds })));
    const bugs: unknown[] = [];
    const worker = async () => {
      for (;;) {
        const next = bugs.length > 0 || options.signal?.aborted ? null : queue.take(Date.now());
        if (next === null) return;
        if ('waitMs' in next) await waitFor(queue.whenChanged(), next.waitMs);
        else await this.work(next.store, queue, context, retries, options).catch((error: unknown) => bugs.push(error));
        if (bugs.length > 0) for (const group of groups) queue.drop(group);
      }
    };
    try {
      await Promise.all(Array.from({ length: this.config.RECONCILE_CONCURRENCY }, worker));
      if (bugs.length > 0) throw bugs[0];
    } finally {
      // Reported in the order of the connections and their stores, whatever order they ended in.
      const rank = new Map(
        groups.flatMap((group) =>
          group.plan.storeIds.map((storeId, index) => [`${group.plan.connection.id}/${storeId}`, [group.index, index]]),
        ),
      );
      const key = (report: StoreReport) => rank.get(`${report.connection_id}/${report.store_id}`) ?? [0, 0];
      context.stores.sort((a, b) => key(a)[0] - key(b)[0] || key(a)[1] - key(b)[1]);
    }
  }

  /** One attempt at one store; the store is given back to the queue when it is to be tried again. */
  private async work(
    store: QueuedStore<Group>,
    queue: StoreQueue<Group>,
    context: RunContext,
    retries: StoreRetries,
    options: PassOptions,
  ): Promise<void> {
    const group = store.group;
    let retryAt: number | undefined;
    try {
      if (group.stopped || options.signal?.aborted) return;
      const release = options.claim ? options.claim(group.plan.connection.id, store.storeId) : () => undefined;
      if (release === null) return;
      // A claim lasts until the store's snapshot is compared and appended, or it is settled without one.
      let kept = false;
      try {
        const snapshot = await this.attempt(store, context, retries, options.signal);
        if (snapshot === 'retry') retryAt = Date.now() + this.retryDelay(store.attempt, retries);
        else if (snapshot !== undefined && !group.applied) {
          group.snapshots.push(snapshot);
          group.releases.push(release);
          kept = true;
        } else if (snapshot !== undefined && !group.stopped) await this.applyGuarded(group, [snapshot], context);
      } finally {
        if (!kept) release();
      }
    } finally {
      queue.done(store, retryAt);
      if (group.stopped) queue.drop(group);
      if (store.attempt === 1 && --group.firstRound === 0)
        await this.closeFirstRound(group, context).finally(() => group.releases.splice(0).forEach((end) => end()));
    }
  }

  /**
   * Fetches the store within its deadline: its snapshot, or undefined when it is settled without
   * one (not the owner's store, the connection stopped, or its last attempt failed), or 'retry'.
   */
  private async attempt(
    { group, storeId, attempt }: QueuedStore<Group>,
    context: RunContext,
    retries: StoreRetries,
    stop: AbortSignal | undefined,
  ): Promise<StoreSnapshot | 'retry' | undefined> {
    const { connection } = group.plan;
    const report = group.reports.get(storeId)!;
    const seconds = this.config.RECONCILE_STORE_TIMEOUT;
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new StoreTimeoutError(seconds)), seconds * 1000);
    const stopped = () => deadline.abort(new PassStoppedError());
    stop?.addEventListener('abort', stopped);
    const started = Date.now();
    try {
      return await this.fetcher.fetch(connection, storeId, deadline.signal);
    } catch (error) {
      if (error instanceof PassStoppedError || stop?.aborted) return undefined;
      if (error instanceof StoreNotOfConnectionError) {
        // STORE_IDS applies to every connection: another owner's store is no fault of this run.
        context.notes.push(
          `connection ${connection.id}: store ${storeId} answered ${error.status}: not this connection's store, left out`,
        );
        group.foreign.add(storeId);
        context.notOwned.push({ connectionId: connection.id, storeId });
        return undefined;
      }
      if (error instanceof ReauthorizationRequiredError) {
        if (!group.stopped) context.errors.push(`connection ${connection.id}: reauthorization required, skipped`);
        group.stopped = true;
        return undefined;
      }
      if (!(error instanceof StoreTimeoutError) && !isOperationalFault(error)) throw error;
      const message = `attempt ${attempt} of ${retries.attempts}: ${messageOf(error)}`;
      this.logger.warn({
        msg: 'a store of a reconcile run failed',
        connection: connection.id,
        store: storeId,
        attempt,
      });
      if (attempt < retries.attempts) {
        report.notes.push(`${message}; tried again later`);
        return 'retry';
      }
      report.errors.push(`${message}; nothing reconciled for this store`);
      context.stores.push(report);
      return undefined;
    } finally {
      clearTimeout(timer);
      stop?.removeEventListener('abort', stopped);
      report.duration_ms += Date.now() - started;
    }
  }

  /** Half to all of the base doubled at each attempt: stores failing together do not come back together. */
  private retryDelay(attempt: number, retries: StoreRetries): number {
    const ceiling = retries.baseDelayMs * 2 ** (attempt - 1);
    return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
  }

  /** Every store has had its first attempt: what came is compared and appended together. */
  private async closeFirstRound(group: Group, context: RunContext): Promise<void> {
    group.applied = true;
    if (group.stopped) return;
    const { plan } = group;
    if (group.snapshots.length > 0) return this.applyGuarded(group, group.snapshots, context);
    // With --store, another connection may own it (ReconcileService says so when none does).
    if (group.foreign.size === plan.storeIds.length && plan.storeFilter === undefined && !plan.otherStores)
      context.errors.push(
        `connection ${plan.connection.id}: every store (${plan.storeIds.join(', ')}) answered 403/404 (a wrong UPSTREAM_SNAPSHOT_PATH?); nothing reconciled`,
      );
  }

  /** Compares and appends `snapshots`; a fault is reported on their stores, and the run goes on. */
  private async applyGuarded(group: Group, snapshots: StoreSnapshot[], context: RunContext): Promise<void> {
    const reports = new Map(snapshots.map(({ storeId }) => [storeId, group.reports.get(storeId)!]));
    context.stores.push(...reports.values());
    const started = Date.now();
    const ownerStores = (group.plan.otherStores ?? 0) + group.plan.storeIds.length - group.foreign.size;
    const turn = this.applying.then(() => this.reconciler.apply(group.plan, snapshots, ownerStores, reports, context));
    this.applying = turn.then(
      () => undefined,
      () => undefined,
    );
    try {
      await turn;
    } catch (error) {
      if (!isOperationalFault(error)) throw error;
      this.logger.warn({ msg: 'reconcile of a connection failed', connection: group.plan.connection.id, err: error });
      for (const report of reports.values())
        report.errors.push(`reconcile stopped: ${messageOf(error)}; nothing appended`);
    } finally {
      for (const report of reports.values()) report.duration_ms += Date.now() - started;
    }
  }
}

/** Until `changed` resolves or `ms` pass, whichever first. */
async function waitFor(changed: Promise<void>, ms: number): Promise<void> {
  if (ms === Infinity) return changed;
  const timer = new AbortController();
  await Promise.race([changed, sleep(ms, undefined, { signal: timer.signal }).catch(() => undefined)]);
  timer.abort();
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 500);
}

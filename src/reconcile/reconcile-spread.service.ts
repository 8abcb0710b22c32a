import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { LeaseLoop, LeaseState } from '../common/lease-loop.js';
import type { Connection } from '../connections/connection.js';
import { ConnectionRepository } from '../connections/connection.repository.js';
import { AppConfig } from '../config/app-config.js';
import { AdvisoryLease } from '../database/advisory-lease.js';
import { CONNECTION_CREATED } from '../oauth/connect.service.js';
import { planShare } from '../sinks/dispatch/sink-shares.js';
import { ConnectionReconciler } from './connection.reconciler.js';
import type { ConnectionPlan } from './connection.reconciler.js';
import { isOperationalFault } from './operational-fault.js';
import { RECONCILE_WORKER_LOCK, ReconcileLeaseRepository } from './reconcile-lease.repository.js';
import { RECONCILE_BUCKETS, storeBucket, wasDown } from './reconcile-schedule.js';
import { ReconcileStoresRepository } from './reconcile-stores.repository.js';
import type { DueRow } from './reconcile-stores.repository.js';
import { ReconcileService } from './reconcile.service.js';
import { StoreSchedule } from './store-schedule.js';

/** How often the leases are looked at again: a dead process's stores wait at most this long after its session ended. */
const REFRESH_MS = 1000;
/** How often the connections' stores are looked for (new stores, priorities); at once after a connection is made here. */
const DISCOVER_MS = 10_000;
/** How often this process says it is alive (RECONCILE_DOWNTIME_AFTER is measured from it). */
const HEARTBEAT_MS = 5000;
/** An idle process looks for due stores at least this often (another process may have scheduled them). */
const IDLE_POLL_MS = 2000;
/** A batch that could not run (a run holds the reconcile lock) is tried again after this. */
const BUSY_MS = 2000;
const ALL_BUCKETS = Array.from({ length: RECONCILE_BUCKETS }, (_, key) => key);

export type SpreadState = LeaseState | 'disabled';

/**
 * The spread schedule of reconcile (docs/reference.md §13), in every process with the `reconcile`
 * role when RECONCILE_CRON is unset. The processes share the stores as the sink dispatchers share
 * the sinks: each holds RECONCILE_WORKER_LOCK shared and, on the same session, the leases of its
 * share of RECONCILE_BUCKETS buckets (planShare), and reconciles only the due stores of the buckets
 * it holds, in batches (ReconcileService.runBatch), priorities first, then the longest due. A
 * bucket handed on is unlocked once no fetch of its stores is under way here, and a dead
 * process's buckets end with its session: never two processes on one store at once.
 */
@Injectable()
export class ReconcileSpread implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(ReconcileSpread.name);
  private readonly loop: LeaseLoop;
  private readonly held = new Set<number>();
  private readonly handing = new Set<number>();
  /** Fetches under way here, by bucket. */
  private readonly inWork = new Map<number, number>();
  private discoveredAt = 0;
  private aliveAt = 0;
  private disabled = true;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly leases: ReconcileLeaseRepository,
    private readonly stores: ReconcileStoresRepository,
    private readonly schedule: StoreSchedule,
    private readonly connections: ConnectionRepository,
    private readonly reconciler: ConnectionReconciler,
    private readonly service: ReconcileService,
    private readonly config: AppConfig,
  ) {
    const lease = new AdvisoryLease(dataSource, RECONCILE_WORKER_LOCK, (runner) => leases.prepare(runner), 'shared');
    this.loop = new LeaseLoop(lease, {
      role: 'reconcile worker',
      logger: this.logger,
      whileHeld: (runner) => this.spread(runner),
      afterHeld: async () => this.forget(),
    });
  }

  get state(): SpreadState {
    return this.disabled ? 'disabled' : this.loop.state;
  }

  onApplicationBootstrap(): void {
    if (this.config.reconcileSchedule.mode !== 'spread' || !this.config.hasRole('reconcile')) return;
    this.disabled = false;
    this.logger.log(`reconcile spread over ${this.config.RECONCILE_INTERVAL}`);
    this.loop.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.loop.stop();
  }

  /** A connection made here: its stores are looked for now, and go first. */
  @OnEvent(CONNECTION_CREATED)
  onConnected(): void {
    this.discoveredAt = 0;
    this.loop.alarm.wake();
  }

  private async spread(runner: QueryRunner): Promise<void> {
    const { downtimeMs } = this.config.reconcileSchedule;
    const before = await this.stores.heartbeat();
    this.aliveAt = Date.now();
    if (wasDown(before, Date.now(), downtimeMs)) {
      const stores = await this.stores.prioritizeAll('downtime', new Date(before!));
      this.logger.log({
        msg: 'reconcile was stopped for longer than RECONCILE_DOWNTIME_AFTER: every store first',
        stores,
      });
    }
    await this.rebalance(runner);
    const stop = new AbortController();
    stop.signal.addEventListener('abort', () => this.loop.alarm.wake());
    const work = this.work(stop.signal);
    try {
      while (!this.loop.stopping) {
        await this.loop.alarm.pause(REFRESH_MS);
        await this.rebalance(runner);
      }
    } finally {
      stop.abort();
      await work;
    }
  }

  /** Gives up the buckets handed on whose fetches ended, takes or hands on buckets to hold this process's share. */
  private async rebalance(runner: QueryRunner): Promise<void> {
    const before = [...this.held].join();
    for (const key of [...this.handing]) {
      if ((this.inWork.get(key) ?? 0) > 0) continue;
      await this.leases.release(runner, key);
      this.held.delete(key);
      this.handing.delete(key);
    }
    const view = await this.leases.view(runner);
    const keeping = new Set([...this.held].filter((key) => !this.handing.has(key)));
    const plan = planShare(ALL_BUCKETS, keeping, view);
    for (const key of plan.release) this.handing.add(key);
    for (let i = 0, room = plan.room; i < plan.candidates.length && room > 0; i++) {
      if (!(await this.leases.tryTake(runner, plan.candidates[i]))) continue;
      this.held.add(plan.candidates[i]);
      room--;
    }
    if ([...this.held].join() !== before) {
      this.logger.log({ msg: 'reconcile share', buckets: this.held.size, workers: view.dispatchers });
      this.discoveredAt = 0;
      this.loop.alarm.wake();
    }
    if (Date.now() - this.aliveAt >= HEARTBEAT_MS) {
      this.aliveAt = Date.now();
      await this.stores.heartbeat();
    }
  }

  private forget(): void {
    this.held.clear();
    this.handing.clear();
  }

  /** The buckets whose stores this process reconciles: held and not being handed on. */
  private working(): number[] {
    return [...this.held].filter((key) => !this.handing.has(key));
  }

  private async work(stop: AbortSignal): Promise<void> {
    const alarm = this.loop.alarm;
    while (!stop.aborted) {
      alarm.takeWake();
      try {
        if (Date.now() - this.discoveredAt >= DISCOVER_MS) {
          this.discoveredAt = Date.now();
          await this.discover();
        }
        const due = await this.stores.due(this.working(), this.batchSize);
        if (due.length > 0) {
          if (!(await this.reconcileDue(due, stop))) await alarm.pause(BUSY_MS);
          continue;
        }
        const soonest = await this.stores.soonestDue(this.working());
        const untilDiscovery = DISCOVER_MS - (Date.now() - this.discoveredAt);
        const untilDue = soonest === null ? Infinity : soonest - Date.now();
        await alarm.sleep(Math.max(0, Math.min(untilDiscovery, untilDue, IDLE_POLL_MS)));
      } catch (error) {
        if (!isOperationalFault(error)) this.logger.error({ msg: 'reconcile spread failed; retrying', err: error });
        else this.logger.warn({ msg: 'reconcile spread failed; retrying', err: error });
        await alarm.pause(BUSY_MS);
      }
    }
  }

  private get batchSize(): number {
    return 16 * this.config.RECONCILE_CONCURRENCY;
  }

  /**
   * The stores of the active connections, scheduled, and made to go first when due to. Every
   * process looks at every connection (what it writes is the same whoever writes it), so a
   * connection made in one is seen by all within DISCOVER_MS.
   */
  private async discover(): Promise<void> {
    const connections = (await this.connections.list()).filter((connection) => connection.state === 'active');
    for (const connection of connections) {
      try {
        const plan = await this.reconciler.plan(connection, undefined, {
          runId: '',
          errors: [],
          notes: [],
          stores: [],
          notOwned: [],
        });
        if (plan !== null) await this.schedule.found(connection, plan.owner, plan.storeIds);
      } catch (error) {
        if (!isOperationalFault(error)) throw error;
        this.logger.warn({
          msg: 'the stores of a connection could not be looked for',
          connection: connection.id,
          err: error,
        });
      }
    }
  }

  /** Reconciles due stores, one batch per trigger (priorities first); false when none could run. */
  private async reconcileDue(due: DueRow[], stop: AbortSignal): Promise<boolean> {
    const connections = new Map((await this.connections.list()).map((connection) => [connection.id, connection]));
    const byTrigger = new Map<string, DueRow[]>();
    for (const row of due) {
      const trigger = row.priority ?? 'spread';
      byTrigger.set(trigger, [...(byTrigger.get(trigger) ?? []), row]);
    }
    let ran = false;
    for (const [trigger, rows] of byTrigger) {
      if (stop.aborted) break;
      const plans = plansOf(rows, connections);
      if (plans.length === 0) continue;
      const run = await this.service.runBatch(trigger, plans, {
        claim: (id, store) => this.claim(id, store),
        signal: stop,
      });
      ran ||= run !== undefined;
    }
    return ran;
  }

  /** A fetch of a store may start while its bucket is held here and not handed on; its end is counted. */
  private claim(connectionId: number, storeId: string): (() => void) | null {
    const key = storeBucket(connectionId, storeId);
    if (!this.held.has(key) || this.handing.has(key)) return null;
    this.inWork.set(key, (this.inWork.get(key) ?? 0) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const left = this.inWork.get(key)! - 1;
      if (left > 0) this.inWork.set(key, left);
      else this.inWork.delete(key);
    };
  }
}

/** A plan per connection of due rows (connections whose owner is not known yet are left for later). */
function plansOf(rows: DueRow[], connections: Map<number, Connection>): ConnectionPlan[] {
  const byConnection = new Map<number, DueRow[]>();
  for (const row of rows) byConnection.set(row.connectionId, [...(byConnection.get(row.connectionId) ?? []), row]);
  const plans: ConnectionPlan[] = [];
  for (const [id, ofConnection] of byConnection) {
    const connection = connections.get(id);
    if (connection === undefined || connection.state !== 'active' || connection.ownerId === null) continue;
    const ownedHere = ofConnection.filter((row) => row.owned).length;
    plans.push({
      connection,
      owner: connection.ownerId,
      storeIds: ofConnection.map((row) => row.storeId),
      storeFilter: undefined,
      otherStores: Math.max(0, ofConnection[0].ownedStores - ownedHere),
    });
  }
  return plans;
}

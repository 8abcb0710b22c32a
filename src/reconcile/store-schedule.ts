import { Injectable } from '@nestjs/common';
import type { Connection } from '../connections/connection.js';
import { AppConfig } from '../config/app-config.js';
import type { RunContext } from './reconcile-report.js';
import {
  justMade,
  nextDueAfterFailure,
  nextDueAfterSuccess,
  phaseOf,
  placeSlots,
  priorityOf,
  storeBucket,
  turnAt,
} from './reconcile-schedule.js';
import type { PriorityReason } from './reconcile-schedule.js';
import { ReconcileStoresRepository } from './reconcile-stores.repository.js';
import type { NewScheduledStore, ScheduledStore, StoreOutcome } from './reconcile-stores.repository.js';

/** Randomness and time, injectable for tests. */
export interface ScheduleClock {
  now(): number;
  random(): number;
}

export const SYSTEM_CLOCK: ScheduleClock = { now: () => Date.now(), random: () => Math.random() };

/**
 * The per-store schedule of reconcile (docs/reference.md §13) kept in PostgreSQL: stores found
 * are given slots (reconcile-schedule.ts) or go first, and every reconcile of a store, whatever
 * started it (the spread, RECONCILE_CRON, a connection, the command), records its outcome and
 * when the store is due again.
 */
@Injectable()
export class StoreSchedule {
  private clock: ScheduleClock = SYSTEM_CLOCK;

  constructor(
    private readonly stores: ReconcileStoresRepository,
    private readonly config: AppConfig,
  ) {}

  /** For tests: a clock and randomness of their own. */
  useClock(clock: ScheduleClock): void {
    this.clock = clock;
  }

  private get intervalMs(): number {
    return this.config.reconcileSchedule.intervalMs;
  }

  /**
   * A connection's stores as its plan names them: the new ones are scheduled (all due now, as
   * `connection`, when the connection was just made and had none; else in slots, oldest first),
   * and the known ones go first when the connection was subscribed again or went silent.
   */
  async found(connection: Connection, owner: string, storeIds: string[]): Promise<void> {
    const now = this.clock.now();
    const { intervalMs, silenceMs } = this.config.reconcileSchedule;
    const known = await this.stores.stores([connection.id]);
    const knownIds = new Set(known.map((store) => store.storeId));
    const fresh = storeIds.filter((storeId) => !knownIds.has(storeId));
    const [subscribedAt, deliveries] = await Promise.all([
      this.stores.subscribedAt(connection.id),
      this.stores.deliveries(owner),
    ]);
    const facts = { createdAt: connection.createdAt.getTime(), subscribedAt, lastDeliveryAt: deliveries.owner };
    const thresholds = { intervalMs, silenceMs };
    if (fresh.length > 0) {
      const first = known.length === 0 && justMade(facts, now, thresholds);
      await this.stores.add(await this.placed(connection.id, fresh, now, first ? 'connection' : null));
    }
    const byReason = new Map<PriorityReason, string[]>();
    for (const store of known) {
      const reason = priorityOf(store, facts, deliveries.newest, now, thresholds);
      if (reason !== null) byReason.set(reason, [...(byReason.get(reason) ?? []), store.storeId]);
    }
    for (const [reason, ids] of byReason) await this.stores.prioritize(connection.id, ids, reason);
  }

  /** New rows for `storeIds` (in the order given, the oldest first): due now with `priority`, else at their slots. */
  private async placed(
    connectionId: number,
    storeIds: string[],
    now: number,
    priority: string | null,
  ): Promise<NewScheduledStore[]> {
    const slots = placeSlots(await this.stores.slots(), storeIds.length, phaseOf(now, this.intervalMs));
    return storeIds.map((storeId, index) => ({
      connectionId,
      storeId,
      bucket: storeBucket(connectionId, storeId),
      slot: slots[index],
      nextDueAt: priority === null ? turnAt(slots[index], now, this.intervalMs) : now,
      priority,
    }));
  }

  /** Records what a run did for each store it settled (reported, or found not the owner's); `at`: when its work began. */
  async record(context: RunContext, at: number): Promise<void> {
    const settled = [
      ...context.stores.map((report) => ({
        connectionId: report.connection_id,
        storeId: report.store_id,
        error: report.errors[0] ?? null,
        owned: true,
      })),
      ...context.notOwned.map((store) => ({ ...store, error: null, owned: false })),
    ];
    if (settled.length === 0) return;
    const known = new Map<string, ScheduledStore>();
    for (const store of await this.stores.stores([...new Set(settled.map((item) => item.connectionId))]))
      known.set(`${store.connectionId}/${store.storeId}`, store);
    const missing = settled.filter((item) => !known.has(`${item.connectionId}/${item.storeId}`));
    if (missing.length > 0) {
      const byConnection = new Map<number, string[]>();
      for (const item of missing)
        byConnection.set(item.connectionId, [...(byConnection.get(item.connectionId) ?? []), item.storeId]);
      for (const [connectionId, storeIds] of byConnection) {
        const rows = await this.placed(connectionId, storeIds, at, null);
        await this.stores.add(rows);
        for (const row of rows)
          known.set(`${connectionId}/${row.storeId}`, {
            ...row,
            lastReconciledAt: null,
            consecutiveFailures: 0,
            createdAt: at,
          });
      }
    }
    const outcomes: StoreOutcome[] = settled.map((item) => {
      const store = known.get(`${item.connectionId}/${item.storeId}`)!;
      const random = this.clock.random();
      const nextDueAt =
        item.error === null
          ? nextDueAfterSuccess(store.slot, at, this.intervalMs, random)
          : nextDueAfterFailure(store.consecutiveFailures + 1, this.clock.now(), this.intervalMs, random);
      return { ...item, error: item.error?.slice(0, 500) ?? null, at, nextDueAt };
    });
    await this.stores.record(outcomes);
  }
}

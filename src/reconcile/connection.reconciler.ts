import { Inject, Injectable } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import type { Connection } from '../connections/connection.js';
import { ConnectionRepository } from '../connections/connection.repository.js';
import { AppConfig } from '../config/app-config.js';
import { LOG_APPENDED } from '../event-log/append-batcher.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import type { NewLogEntry } from '../event-log/log-entry.js';
import { MetricsService } from '../observability/metrics.service.js';
import { RESOURCE_TABLES } from '../projection/resource-tables.js';
import { ReadModelRepository } from '../query/read-model.repository.js';
import { UPSTREAM_SETTINGS } from '../upstream/upstream-settings.js';
import type { UpstreamSettings } from '../upstream/upstream-settings.js';
import type { RunContext, StoreReport } from './reconcile-report.js';
import { ReconcileRepository } from './reconcile.repository.js';
import { SNAPSHOT_TYPES } from './snapshot.fetcher.js';
import type { StoreSnapshot } from './snapshot.fetcher.js';
import { compareType, destroysRefused } from './type-comparison.js';
import type { Difference } from './type-comparison.js';

/** Below this many, destroys are never called implausible (small menus may shrink). */
const MIN_IMPLAUSIBLE_DESTROYS = 5;

/** A connection of a run, ready to be reconciled: its owner and the stores to fetch. */
export interface ConnectionPlan {
  connection: Connection;
  owner: string;
  storeIds: string[];
  storeFilter: string | undefined;
  /** Stores the owner has besides `storeIds` (a batch of the spread schedule); none when absent. */
  otherStores?: number;
}

/**
 * One connection's part of a reconcile run (docs/reference.md §8): learn its owner and stores
 * (plan), and, once the stores' snapshots are fetched (ReconcilePass), compare every type with the
 * owner's mirror (compareType) and append every difference in one statement (apply). What it
 * finds goes to the run's context and the stores' reports; a fault throws to the caller.
 */
@Injectable()
export class ConnectionReconciler {
  constructor(
    private readonly connections: ConnectionRepository,
    private readonly readModel: ReadModelRepository,
    private readonly log: EventLogRepository,
    private readonly repository: ReconcileRepository,
    private readonly events: EventEmitter2,
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
    @Inject(UPSTREAM_SETTINGS) private readonly settings: UpstreamSettings | null,
  ) {}

  /** The connection's owner and stores; null (with a note saying why) when there is nothing to fetch yet. */
  async plan(
    connection: Connection,
    storeFilter: string | undefined,
    context: RunContext,
  ): Promise<ConnectionPlan | null> {
    const owner = connection.ownerId ?? (await this.learnOwner(connection));
    if (owner === null) {
      // Nothing to compare with yet: a waiting state, not a fault of this run.
      context.notes.push(
        `connection ${connection.id}: its resource owner is not known yet (learned from the token answer or the first webhook on its key); skipped`,
      );
      return null;
    }
    const storeIds = storeFilter !== undefined ? [storeFilter] : await this.storesOf(owner);
    if (storeIds.length === 0) {
      context.notes.push(
        `connection ${connection.id}: no store known yet (set STORE_IDS, or wait for an order event); skipped`,
      );
      return null;
    }
    return { connection, owner, storeIds, storeFilter };
  }

  /**
   * Compares `snapshots` (some or all of the owner's `ownerStores` stores) with the mirror and
   * appends the differences, filling the stores' `reports`. Destroys are left out unless the
   * snapshots are the owner's whole menu.
   */
  async apply(
    plan: ConnectionPlan,
    snapshots: StoreSnapshot[],
    ownerStores: number,
    reports: Map<string, StoreReport>,
    context: RunContext,
  ): Promise<void> {
    const options = {
      owner: plan.owner,
      runId: context.runId,
      refused: destroysRefused(plan.storeFilter, ownerStores),
      maxDestroyRatio: this.config.RECONCILE_MAX_DESTROY_RATIO,
      minImplausibleDestroys: MIN_IMPLAUSIBLE_DESTROYS,
    };
    const differences: Difference[] = [];
    for (const type of [...SNAPSHOT_TYPES, 'order'] as const) {
      const mirror = await this.readModel.find(RESOURCE_TABLES[type], { ownerId: plan.owner, includeDeleted: true });
      const comparison = compareType(type, snapshots, mirror, options);
      for (const [storeId, count] of comparison.checked) reports.get(storeId)!.checked[type] = count;
      for (const { storeId, text } of comparison.errors) reports.get(storeId)!.errors.push(text);
      for (const { storeId, text } of comparison.notes) reports.get(storeId)!.notes.push(text);
      for (const { kind, storeId } of comparison.differences) {
        const counted = reports.get(storeId)!.differences[kind];
        counted[type] = (counted[type] ?? 0) + 1;
        this.metrics.reconcileDifferences.inc({ type, kind });
      }
      differences.push(...comparison.differences);
    }
    await this.append(differences, reports);
  }

  private async append(differences: Difference[], reports: Map<string, StoreReport>): Promise<void> {
    const logged = differences.filter(
      (difference): difference is Difference & { entry: NewLogEntry } => difference.entry !== null,
    );
    if (logged.length === 0) return;
    const results = await this.log.append(logged.map(({ entry }) => entry));
    let head = -1;
    results.forEach((result, index) => {
      if (!result.inserted) return;
      reports.get(logged[index].storeId)!.events_appended++;
      if (result.position > head) head = result.position;
    });
    if (head >= 0) this.events.emit(LOG_APPENDED, { head });
  }

  private async learnOwner(connection: Connection): Promise<string | null> {
    const owner = await this.repository.ownerSeenOn(connection.id);
    if (owner !== null) await this.connections.setOwner(connection.id, owner);
    return owner;
  }

  /** STORE_IDS, the upstream's known stores, and the stores the owner's order events named. */
  private async storesOf(owner: string): Promise<string[]> {
    const learned = await this.readModel.find(RESOURCE_TABLES.store, { ownerId: owner });
    const ids = [...this.config.STORE_IDS, ...(this.settings?.storeIds ?? []), ...learned.map((store) => store.id)];
    return [...new Set(ids)];
  }
}

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
import { ReauthorizationRequiredError } from '../upstream/upstream.errors.js';
import { UPSTREAM_SETTINGS } from '../upstream/upstream-settings.js';
import type { UpstreamSettings } from '../upstream/upstream-settings.js';
import { emptyStoreReport } from './reconcile-report.js';
import type { RunContext, StoreReport } from './reconcile-report.js';
import { ReconcileRepository } from './reconcile.repository.js';
import { SNAPSHOT_TYPES, SnapshotFetcher, StoreNotOfConnectionError } from './snapshot.fetcher.js';
import type { StoreSnapshot } from './snapshot.fetcher.js';
import { compareType, destroysRefused } from './type-comparison.js';
import type { Difference } from './type-comparison.js';

/** Below this many, destroys are never called implausible (small menus may shrink). */
const MIN_IMPLAUSIBLE_DESTROYS = 5;

/**
 * One connection's part of a reconcile run (docs/reference.md §8): learn its owner and stores, fetch each
 * store's snapshot, compare every type with the owner's mirror (compareType), and append every
 * difference in one statement, so one transaction per connection. What it finds goes to the run's
 * context; a fault throws to ReconcileService, which reports it and goes on with the next connection.
 */
@Injectable()
export class ConnectionReconciler {
  constructor(
    private readonly connections: ConnectionRepository,
    private readonly fetcher: SnapshotFetcher,
    private readonly readModel: ReadModelRepository,
    private readonly log: EventLogRepository,
    private readonly repository: ReconcileRepository,
    private readonly events: EventEmitter2,
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
    @Inject(UPSTREAM_SETTINGS) private readonly settings: UpstreamSettings | null,
  ) {}

  async reconcile(connection: Connection, storeFilter: string | undefined, context: RunContext): Promise<void> {
    const owner = connection.ownerId ?? (await this.learnOwner(connection));
    if (owner === null) {
      // Nothing to compare with yet: a waiting state, not a fault of this run.
      context.notes.push(
        `connection ${connection.id}: its resource owner is not known yet (learned from the token answer or the first webhook on its key); skipped`,
      );
      return;
    }
    const storeIds = storeFilter !== undefined ? [storeFilter] : await this.storesOf(owner);
    if (storeIds.length === 0) {
      context.notes.push(
        `connection ${connection.id}: no store known yet (set STORE_IDS, or wait for an order event); skipped`,
      );
      return;
    }
    const fetchMs = new Map<string, number>();
    const snapshots = await this.fetchStores(connection, storeIds, fetchMs, context);
    if (snapshots === undefined) return;
    if (snapshots.length === 0) {
      // With --store, another connection may own it (ReconcileService says so when none does).
      if (storeFilter === undefined)
        context.errors.push(
          `connection ${connection.id}: every store (${storeIds.join(', ')}) answered 403/404 (a wrong UPSTREAM_SNAPSHOT_PATH?); nothing reconciled`,
        );
      return;
    }
    await this.applyDifferences(
      connection,
      owner,
      snapshots,
      { refused: destroysRefused(storeFilter, snapshots), fetchMs },
      context,
    );
  }

  /**
   * The snapshots of the stores that are this connection's, each fetch's time (its retries
   * included) in `fetchMs`; undefined when the connection needs reauthorization.
   */
  private async fetchStores(
    connection: Connection,
    storeIds: string[],
    fetchMs: Map<string, number>,
    context: RunContext,
  ): Promise<StoreSnapshot[] | undefined> {
    const snapshots: StoreSnapshot[] = [];
    for (const storeId of storeIds) {
      const started = Date.now();
      try {
        snapshots.push(await this.fetcher.fetch(connection, storeId));
        fetchMs.set(storeId, Date.now() - started);
      } catch (error) {
        if (error instanceof StoreNotOfConnectionError) {
          // STORE_IDS applies to every connection: another owner's store is no fault of this run.
          context.notes.push(
            `connection ${connection.id}: store ${storeId} answered ${error.status}: not this connection's store, left out`,
          );
          continue;
        }
        if (!(error instanceof ReauthorizationRequiredError)) throw error;
        context.errors.push(`connection ${connection.id}: reauthorization required, skipped`);
        return undefined;
      }
    }
    return snapshots;
  }

  /**
   * Compares every type over the fetched stores and appends the differences at once. A store's
   * duration is its fetch and this work, which its differences share with the other stores'.
   */
  private async applyDifferences(
    connection: Connection,
    owner: string,
    snapshots: StoreSnapshot[],
    { refused, fetchMs }: { refused: string | undefined; fetchMs: Map<string, number> },
    context: RunContext,
  ): Promise<void> {
    const started = Date.now();
    const reports = new Map(
      snapshots.map((snapshot) => [snapshot.storeId, emptyStoreReport(connection.id, snapshot.storeId, owner)]),
    );
    context.stores.push(...reports.values());
    const options = {
      owner,
      runId: context.runId,
      refused,
      maxDestroyRatio: this.config.RECONCILE_MAX_DESTROY_RATIO,
      minImplausibleDestroys: MIN_IMPLAUSIBLE_DESTROYS,
    };
    try {
      const differences: Difference[] = [];
      for (const type of [...SNAPSHOT_TYPES, 'order'] as const) {
        const mirror = await this.readModel.find(RESOURCE_TABLES[type], { ownerId: owner, includeDeleted: true });
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
    } finally {
      for (const report of reports.values())
        report.duration_ms = (fetchMs.get(report.store_id) ?? 0) + Date.now() - started;
    }
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

import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import type { Connection } from '../auth/connection.js';
import { ConnectionRepository } from '../auth/connection.repository.js';
import { AppConfig } from '../config/app-config.js';
import type { SpecEventName } from '../config/event-names.js';
import { LOG_APPENDED } from '../event-log/append-batcher.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import type { NewLogEntry } from '../event-log/log-entry.js';
import { MetricsService } from '../observability/metrics.service.js';
import { ReadModelRepository } from '../projection/read-model.repository.js';
import { RESOURCE_TABLES } from '../projection/resource-tables.js';
import type { ResourceType } from '../projection/webhook-event.js';
import { ReauthorizationRequiredError } from '../upstream/upstream.errors.js';
import { UPSTREAM_SETTINGS } from '../upstream/upstream-settings.js';
import type { UpstreamSettings } from '../upstream/upstream-settings.js';
import { ProjectionCatchUp } from './projection-catch-up.js';
import { reconcileEntry } from './reconcile-event.factory.js';
import { emptyStoreReport } from './reconcile-report.js';
import type { DifferenceKind, ReconcileRun, RunOutcome, StoreReport } from './reconcile-report.js';
import { ReconcileRepository } from './reconcile.repository.js';
import { diffSnapshot } from './snapshot-diff.js';
import type { SnapshotResource, TypeDiff } from './snapshot-diff.js';
import { SNAPSHOT_TYPES, SnapshotFetcher } from './snapshot.fetcher.js';
import type { StoreSnapshot } from './snapshot.fetcher.js';

/** Below this many, destroys are never called implausible (small menus may shrink). */
const MIN_IMPLAUSIBLE_DESTROYS = 5;

export interface ReconcileFilter {
  connectionId?: number;
  storeId?: string;
}

interface RunContext {
  runId: string;
  errors: string[];
  notes: string[];
}

/**
 * Heals what webhooks missed (CONTRACT §8): with the projector caught up and parked events
 * retried, each active connection's stores are fetched from the upstream and compared with the
 * mirror of the connection's owner; every difference is appended to the log as a `reconcile`
 * event (one statement, so one transaction, per connection), so the log stays the truth and a
 * replay reproduces the healed state. Nothing here throws for an upstream fault: it is reported.
 */
@Injectable()
export class ReconcileService {
  private readonly logger = new Logger(ReconcileService.name);

  constructor(
    private readonly connections: ConnectionRepository,
    private readonly fetcher: SnapshotFetcher,
    private readonly readModel: ReadModelRepository,
    private readonly log: EventLogRepository,
    private readonly repository: ReconcileRepository,
    private readonly catchUp: ProjectionCatchUp,
    private readonly events: EventEmitter2,
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
    @Inject(UPSTREAM_SETTINGS) private readonly settings: UpstreamSettings | null,
  ) {}

  async run(trigger: string, filter: ReconcileFilter = {}): Promise<ReconcileRun> {
    const startedAt = new Date();
    const context: RunContext = { runId: randomUUID(), errors: [], notes: [] };
    const stores = await this.repository.exclusively(() => this.reconcileAll(context, filter));
    const outcome: RunOutcome = stores === undefined ? 'skipped'
      : context.errors.length === 0 && stores.every((store) => store.errors.length === 0) ? 'ok'
        : stores.some((store) => store.errors.length === 0) ? 'partial' : 'failed';
    if (stores === undefined) context.errors.push('another reconcile run is in progress');
    const run = await this.repository.saveRun({
      trigger, started_at: startedAt.toISOString(), finished_at: new Date().toISOString(), outcome, stores: stores ?? [], errors: context.errors, notes: context.notes,
    });
    this.metrics.reconcileRuns.inc({ outcome });
    this.logger.log({
      msg: `reconcile ${outcome}`, run: run.id, trigger,
      appended: run.stores.reduce((sum, store) => sum + store.events_appended, 0), errors: [...context.errors, ...run.stores.flatMap((store) => store.errors)],
    });
    return run;
  }

  private async reconcileAll(context: RunContext, filter: ReconcileFilter): Promise<StoreReport[]> {
    const caughtUp = await this.catchUp.catchUpAndRetryParked();
    context.errors.push(...caughtUp.errors);
    context.notes.push(...caughtUp.notes);
    const connections = (await this.connections.list())
      .filter((connection) => filter.connectionId === undefined || connection.id === filter.connectionId);
    if (connections.length === 0 && filter.connectionId !== undefined) context.errors.push(`no connection ${filter.connectionId}`);
    if (connections.length === 0 && filter.connectionId === undefined) context.notes.push('no connection yet: nothing to reconcile');
    const reports: StoreReport[] = [];
    for (const connection of connections) {
      if (connection.state !== 'active') {
        // A known state, shown by /api/v1/connections: not a fault of this run.
        context.notes.push(`connection ${connection.id}: ${connection.state}, skipped`);
        continue;
      }
      reports.push(...await this.reconcileConnection(connection, filter.storeId, context));
    }
    return reports;
  }

  private async reconcileConnection(connection: Connection, storeFilter: string | undefined, context: RunContext): Promise<StoreReport[]> {
    const owner = connection.ownerId ?? await this.learnOwner(connection);
    if (owner === null) {
      context.errors.push(`connection ${connection.id}: its resource owner is not known yet (learned from the token answer or the first webhook on its key); skipped`);
      return [];
    }
    const storeIds = storeFilter !== undefined ? [storeFilter] : await this.storesOf(owner);
    if (storeIds.length === 0) {
      context.errors.push(`connection ${connection.id}: no store known (set STORE_IDS, or wait for an order event)`);
      return [];
    }
    const snapshots: StoreSnapshot[] = [];
    for (const storeId of storeIds) {
      try {
        snapshots.push(await this.fetcher.fetch(connection, storeId));
      } catch (error) {
        if (!(error instanceof ReauthorizationRequiredError)) throw error;
        context.errors.push(`connection ${connection.id}: reauthorization required, skipped`);
        return [];
      }
    }
    return this.applyDifferences(connection, owner, snapshots, context);
  }

  /** Compares every type over all the owner's stores (destroys need every store's snapshot) and appends the differences at once. */
  private async applyDifferences(connection: Connection, owner: string, snapshots: StoreSnapshot[], context: RunContext): Promise<StoreReport[]> {
    const started = Date.now();
    const reports = new Map(snapshots.map((snapshot) => [snapshot.storeId, emptyStoreReport(connection.id, snapshot.storeId, owner)]));
    const entries: Array<{ entry: NewLogEntry; storeId: string }> = [];
    const last = snapshots[snapshots.length - 1].storeId;
    const earliest = new Date(Math.min(...snapshots.map((snapshot) => snapshot.fetchedAt.getTime())));
    for (const type of [...SNAPSHOT_TYPES, 'order'] as const) {
      const storeOf = new Map<string, StoreSnapshot>();
      for (const snapshot of snapshots) {
        const list = type === 'order' ? snapshot.orders : snapshot.menu[type];
        const report = reports.get(snapshot.storeId)!;
        report.checked[type] = list.resources.length;
        if (list.error !== undefined) report.errors.push(list.error);
        for (const resource of list.resources) if (!storeOf.has(resource.id)) storeOf.set(resource.id, snapshot);
      }
      const resources = [...storeOf.keys()].map((id) => (type === 'order' ? storeOf.get(id)!.orders : storeOf.get(id)!.menu[type as Exclude<typeof type, 'order'>])
        .resources.find((resource) => resource.id === id)!);
      const diff = await this.diff(type, owner, resources, snapshots, type !== 'order');
      if (diff.destroysSkipped !== undefined) reports.get(last)!.notes.push(`${type}: ${diff.destroysSkipped}`);
      const add = (kind: DifferenceKind, resource: SnapshotResource | string) => {
        const id = typeof resource === 'string' ? resource : resource.id;
        const snapshot = typeof resource === 'string' ? undefined : storeOf.get(id);
        const storeId = snapshot?.storeId ?? last;
        const counts = reports.get(storeId)!.differences[kind];
        counts[type] = (counts[type] ?? 0) + 1;
        this.metrics.reconcileDifferences.inc({ type, kind });
        const included = typeof resource === 'string' ? [] : [resource, ...(resource.related ?? [])];
        const eventType = `${type}.${kind}` as SpecEventName;
        entries.push({ entry: reconcileEntry({ eventType, subject: { type, id }, ownerId: owner, included }, context.runId, snapshot?.fetchedAt ?? earliest), storeId });
      };
      diff.created.forEach((resource) => add('created', resource));
      diff.updated.forEach((resource) => add('updated', resource));
      diff.destroyed.forEach((id) => add('destroyed', id));
    }
    await this.append(entries, reports);
    for (const report of reports.values()) report.duration_ms = Date.now() - started;
    return [...reports.values()];
  }

  private async diff(type: ResourceType, owner: string, resources: SnapshotResource[], snapshots: StoreSnapshot[], destroys: boolean): Promise<TypeDiff> {
    const mirror = await this.readModel.find(RESOURCE_TABLES[type], { ownerId: owner, includeDeleted: true });
    const complete = destroys && snapshots.every((snapshot) => (type === 'order' ? snapshot.orders : snapshot.menu[type as (typeof SNAPSHOT_TYPES)[number]]).complete);
    const diff = diffSnapshot(resources, mirror, { complete, maxRatio: this.config.RECONCILE_MAX_DESTROY_RATIO, minCount: MIN_IMPLAUSIBLE_DESTROYS });
    // Orders are never destroyed (the spec has no such event), and an order list may be a window.
    return destroys ? diff : { created: diff.created, updated: diff.updated, destroyed: [] };
  }

  private async append(entries: Array<{ entry: NewLogEntry; storeId: string }>, reports: Map<string, StoreReport>): Promise<void> {
    if (entries.length === 0) return;
    const results = await this.log.append(entries.map(({ entry }) => entry));
    results.forEach((result, index) => {
      if (result.inserted) reports.get(entries[index].storeId)!.events_appended++;
    });
    if (results.some((result) => result.inserted)) this.events.emit(LOG_APPENDED, { head: Math.max(...results.map((result) => result.position)) });
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

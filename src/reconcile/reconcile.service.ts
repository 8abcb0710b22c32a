import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import type { Connection } from '../connections/connection.js';
import { ConnectionRepository } from '../connections/connection.repository.js';
import { AppConfig } from '../config/app-config.js';
import type { SpecEventName } from '../domain/event-names.js';
import { LOG_APPENDED } from '../event-log/append-batcher.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import type { NewLogEntry } from '../event-log/log-entry.js';
import { DeliveryRejection } from '../ingress/webhook-event.parser.js';
import { MetricsService } from '../observability/metrics.service.js';
import { ReadModelRepository } from '../query/read-model.repository.js';
import { RESOURCE_TABLES } from '../projection/resource-tables.js';
import { ReauthorizationRequiredError } from '../upstream/upstream.errors.js';
import { UPSTREAM_SETTINGS } from '../upstream/upstream-settings.js';
import type { UpstreamSettings } from '../upstream/upstream-settings.js';
import { isOperationalFault } from './operational-fault.js';
import { ProjectionCatchUp } from './projection-catch-up.js';
import { reconcileEntry } from './reconcile-event.factory.js';
import { emptyStoreReport } from './reconcile-report.js';
import type { DifferenceKind, ReconcileRun, RunOutcome, StoreReport } from './reconcile-report.js';
import { ReconcileRepository } from './reconcile.repository.js';
import { diffSnapshot } from './snapshot-diff.js';
import type { SnapshotResource, TypeDiff } from './snapshot-diff.js';
import { SNAPSHOT_TYPES, SnapshotFetcher, StoreNotOfConnectionError } from './snapshot.fetcher.js';
import type { FetchedList, SnapshotType, StoreSnapshot } from './snapshot.fetcher.js';

/** Below this many, destroys are never called implausible (small menus may shrink). */
const MIN_IMPLAUSIBLE_DESTROYS = 5;
/** Why absence proves nothing unless the whole of the owner's one store was read. */
const NO_STORE_ON_MENU = "menu resources carry no store, so absence from one store's snapshot proves nothing";

export interface ReconcileFilter {
  connectionId?: number;
  storeId?: string;
}

interface RunContext {
  runId: string;
  errors: string[];
  notes: string[];
  /** Filled as the connections are reconciled, so a run stopped midway still reports what it did. */
  stores: StoreReport[];
}

interface PendingEntry {
  entry: NewLogEntry;
  storeId: string;
}

/**
 * Heals what webhooks missed (CONTRACT §8): with the projector caught up and parked events
 * retried, each active connection's stores are fetched from the upstream and compared with the
 * mirror of the connection's owner; every difference is appended to the log as a `reconcile`
 * event (one statement, so one transaction, per connection), so the log stays the truth and a
 * replay reproduces the healed state. A fault in one connection's work is reported and the next
 * connection goes on; every run is saved. Only a bug (see isOperationalFault) throws, after its
 * run was saved as failed.
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
    const context: RunContext = { runId: randomUUID(), errors: [], notes: [], stores: [] };
    let outcome: RunOutcome | undefined;
    let bug: { error: unknown } | undefined;
    try {
      if (await this.repository.exclusively(() => this.reconcileAll(context, filter)) === undefined) {
        outcome = 'skipped';
        context.errors.push('another reconcile run is in progress');
      }
    } catch (error) {
      outcome = 'failed';
      context.errors.push(`the run stopped: ${messageOf(error)}`);
      if (!isOperationalFault(error)) {
        bug = { error };
        this.logger.error({ msg: 'reconcile run stopped by an unexpected error', err: error });
      }
    }
    const run = await this.repository.saveRun({
      trigger, started_at: startedAt.toISOString(), finished_at: new Date().toISOString(), outcome: outcome ?? outcomeOf(context),
      stores: context.stores, errors: context.errors, notes: context.notes,
    });
    this.metrics.reconcileRuns.inc({ outcome: run.outcome });
    this.logger.log({
      msg: `reconcile ${run.outcome}`, run: run.id, trigger,
      appended: run.stores.reduce((sum, store) => sum + store.events_appended, 0), errors: [...run.errors, ...run.stores.flatMap((store) => store.errors)],
    });
    if (bug !== undefined) throw bug.error;
    return run;
  }

  private async reconcileAll(context: RunContext, filter: ReconcileFilter): Promise<true> {
    await this.catchUpProjections(context);
    const connections = (await this.connections.list())
      .filter((connection) => filter.connectionId === undefined || connection.id === filter.connectionId);
    if (connections.length === 0 && filter.connectionId !== undefined) context.errors.push(`no connection ${filter.connectionId}`);
    if (connections.length === 0 && filter.connectionId === undefined) context.notes.push('no connection yet: nothing to reconcile');
    for (const connection of connections) {
      if (connection.state !== 'active') {
        // A known state, shown by /api/v1/connections: not a fault of this run.
        context.notes.push(`connection ${connection.id}: ${connection.state}, skipped`);
        continue;
      }
      await this.reconcileGuarded(connection, filter.storeId, context);
    }
    const storeFilter = filter.storeId;
    const active = connections.some((connection) => connection.state === 'active');
    if (storeFilter !== undefined && active && context.errors.length === 0 && !context.stores.some((store) => store.store_id === storeFilter)) {
      context.errors.push(`store ${storeFilter}: no connection's owner has it`);
    }
    return true;
  }

  /** One connection; a fault in its work is reported (on its stores, else on the run), and the run goes on. */
  private async reconcileGuarded(connection: Connection, storeFilter: string | undefined, context: RunContext): Promise<void> {
    const reported = context.stores.length;
    try {
      await this.reconcileConnection(connection, storeFilter, context);
    } catch (error) {
      if (!isOperationalFault(error)) throw error;
      this.logger.warn({ msg: 'reconcile of a connection failed', connection: connection.id, err: error });
      const stores = context.stores.slice(reported);
      const message = `reconcile stopped: ${messageOf(error)}; nothing appended`;
      if (stores.length === 0) context.errors.push(`connection ${connection.id}: ${message}`);
      for (const store of stores) store.errors.push(message);
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

  private async reconcileConnection(connection: Connection, storeFilter: string | undefined, context: RunContext): Promise<void> {
    const owner = connection.ownerId ?? await this.learnOwner(connection);
    if (owner === null) {
      // Nothing to compare with yet: a waiting state, not a fault of this run.
      context.notes.push(`connection ${connection.id}: its resource owner is not known yet (learned from the token answer or the first webhook on its key); skipped`);
      return;
    }
    const storeIds = storeFilter !== undefined ? [storeFilter] : await this.storesOf(owner);
    if (storeIds.length === 0) {
      context.notes.push(`connection ${connection.id}: no store known yet (set STORE_IDS, or wait for an order event); skipped`);
      return;
    }
    const snapshots = await this.fetchStores(connection, storeIds, context);
    if (snapshots === undefined) return;
    if (snapshots.length === 0) {
      // With --store, another connection may own it (reconcileAll says so when none does).
      if (storeFilter === undefined) context.errors.push(`connection ${connection.id}: every store (${storeIds.join(', ')}) answered 403/404 (a wrong UPSTREAM_SNAPSHOT_PATH?); nothing reconciled`);
      return;
    }
    await this.applyDifferences(connection, owner, snapshots, destroysRefused(storeFilter, snapshots), context);
  }

  /** The snapshots of the stores that are this connection's; undefined when the connection needs reauthorization. */
  private async fetchStores(connection: Connection, storeIds: string[], context: RunContext): Promise<StoreSnapshot[] | undefined> {
    const snapshots: StoreSnapshot[] = [];
    for (const storeId of storeIds) {
      try {
        snapshots.push(await this.fetcher.fetch(connection, storeId));
      } catch (error) {
        if (error instanceof StoreNotOfConnectionError) {
          // STORE_IDS applies to every connection: another owner's store is no fault of this run.
          context.notes.push(`connection ${connection.id}: store ${storeId} answered ${error.status}: not this connection's store, left out`);
          continue;
        }
        if (!(error instanceof ReauthorizationRequiredError)) throw error;
        context.errors.push(`connection ${connection.id}: reauthorization required, skipped`);
        return undefined;
      }
    }
    return snapshots;
  }

  /** Compares every type over the fetched stores and appends the differences at once. */
  private async applyDifferences(connection: Connection, owner: string, snapshots: StoreSnapshot[], refused: string | undefined,
    context: RunContext): Promise<void> {
    const started = Date.now();
    const reports = new Map(snapshots.map((snapshot) => [snapshot.storeId, emptyStoreReport(connection.id, snapshot.storeId, owner)]));
    context.stores.push(...reports.values());
    try {
      const entries: PendingEntry[] = [];
      for (const type of [...SNAPSHOT_TYPES, 'order'] as const) {
        entries.push(...await this.differencesOf(type, owner, snapshots, refused, reports, context.runId));
      }
      await this.append(entries, reports);
    } finally {
      for (const report of reports.values()) report.duration_ms = Date.now() - started;
    }
  }

  /** One type's differences as log entries; a resource that cannot be logged is reported, not fatal. */
  private async differencesOf(type: SnapshotType | 'order', owner: string, snapshots: StoreSnapshot[], refused: string | undefined,
    reports: Map<string, StoreReport>, runId: string): Promise<PendingEntry[]> {
    const found = new Map<string, { resource: SnapshotResource; snapshot: StoreSnapshot }>();
    for (const snapshot of snapshots) {
      const list = listOf(snapshot, type);
      const report = reports.get(snapshot.storeId)!;
      report.checked[type] = list.resources.length;
      if (list.error !== undefined) report.errors.push(list.error);
      for (const resource of list.resources) if (!found.has(resource.id)) found.set(resource.id, { resource, snapshot });
    }
    const diff = await this.diff(type, owner, [...found.values()].map(({ resource }) => resource), snapshots, refused);
    const last = snapshots[snapshots.length - 1];
    if (diff.destroysSkipped !== undefined) reports.get(last.storeId)!.notes.push(`${type}: ${diff.destroysSkipped}`);
    const earliest = new Date(snapshots.reduce((min, snapshot) => Math.min(min, snapshot.fetchedAt.getTime()), Infinity));
    const entries: PendingEntry[] = [];
    const add = (kind: DifferenceKind, id: string, resource?: SnapshotResource) => {
      const snapshot = found.get(id)?.snapshot ?? last;
      const report = reports.get(snapshot.storeId)!;
      report.differences[kind][type] = (report.differences[kind][type] ?? 0) + 1;
      this.metrics.reconcileDifferences.inc({ type, kind });
      const change = { eventType: `${type}.${kind}` as SpecEventName, subject: { type, id }, ownerId: owner, included: resource === undefined ? [] : [resource, ...(resource.related ?? [])] };
      try {
        entries.push({ entry: reconcileEntry(change, runId, resource === undefined ? earliest : snapshot.fetchedAt), storeId: snapshot.storeId });
      } catch (error) {
        if (!(error instanceof DeliveryRejection)) throw error;
        report.errors.push(`${type} ${JSON.stringify(id.length > 40 ? `${id.slice(0, 40)}…` : id)} cannot be logged: ${error.message}; skipped`);
      }
    };
    diff.created.forEach((resource) => add('created', resource.id, resource));
    diff.updated.forEach((resource) => add('updated', resource.id, resource));
    diff.destroyed.forEach((id) => add('destroyed', id));
    return entries;
  }

  private async diff(type: SnapshotType | 'order', owner: string, resources: SnapshotResource[], snapshots: StoreSnapshot[],
    refused: string | undefined): Promise<TypeDiff> {
    const mirror = await this.readModel.find(RESOURCE_TABLES[type], { ownerId: owner, includeDeleted: true });
    const guard = { maxRatio: this.config.RECONCILE_MAX_DESTROY_RATIO, minCount: MIN_IMPLAUSIBLE_DESTROYS };
    if (type === 'order') {
      // Orders are never destroyed (the spec has no such event), and an order list may be a window.
      const { created, updated } = diffSnapshot(resources, mirror, { ...guard, complete: false });
      return { created, updated, destroyed: [] };
    }
    return diffSnapshot(resources, mirror, { ...guard, refused, complete: snapshots.every((snapshot) => listOf(snapshot, type).complete) });
  }

  private async append(entries: PendingEntry[], reports: Map<string, StoreReport>): Promise<void> {
    if (entries.length === 0) return;
    const results = await this.log.append(entries.map(({ entry }) => entry));
    let head = -1;
    results.forEach((result, index) => {
      if (!result.inserted) return;
      reports.get(entries[index].storeId)!.events_appended++;
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

function listOf(snapshot: StoreSnapshot, type: SnapshotType | 'order'): FetchedList {
  return type === 'order' ? snapshot.orders : snapshot.menu[type];
}

/**
 * Menu resources carry no store, so a resource absent from the snapshots is known to be destroyed
 * only when they cover the owner's whole menu: no --store filter, and the owner has exactly one
 * store (another owner's store answering 403/404 is not counted). A store that is neither in
 * STORE_IDS nor named by an order event stays unknown here: see the README.
 */
function destroysRefused(storeFilter: string | undefined, snapshots: StoreSnapshot[]): string | undefined {
  if (storeFilter !== undefined) return `destroys skipped: --store given, and ${NO_STORE_ON_MENU}`;
  if (snapshots.length > 1) return `destroys skipped: the owner has ${snapshots.length} stores, and ${NO_STORE_ON_MENU}`;
  return undefined;
}

function outcomeOf(context: RunContext): RunOutcome {
  const clean = context.stores.filter((store) => store.errors.length === 0).length;
  if (context.errors.length === 0 && clean === context.stores.length) return 'ok';
  return clean > 0 ? 'partial' : 'failed';
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 500);
}

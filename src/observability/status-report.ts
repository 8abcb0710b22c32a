import type {
  ArchiveStatusRow,
  ConnectionStatusRow,
  ProjectionStatusRow,
  ReconcileProgressRow,
  ReconcileStatusRow,
  SinkStatusCounts,
} from './status.repository.js';

/** What `menu-sync status` and `GET /api/v1/status` read: the rows of status.repository.ts at one instant. */
export interface StatusSnapshot {
  at: Date;
  connections: ConnectionStatusRow[];
  projections: ProjectionStatusRow[];
  /** The same projections a moment later (`--interval-ms`), to see a lag grow while the position stands; else absent. */
  later?: Array<{ name: string; position: number; lag: number }>;
  /** undefined when the database has no sinks table. */
  sinks: SinkStatusCounts | undefined;
  lastReconcile: ReconcileStatusRow | undefined;
  /** undefined when the database has no reconcile schedule (before its migration), or the caller did not read it. */
  reconcileProgress?: ReconcileProgressRow;
  /** undefined when the database has no archive table, or the caller did not read it. */
  archive?: ArchiveStatusRow;
  quarantined: number;
}

export interface StatusThresholds {
  /** A lag at or above this needs attention whatever its trend. */
  lagEvents: number;
  /** Entries waiting this long while the projector's checkpoint stands still: the projector is stuck. */
  stallMs: number;
  /** Webhooks can arrive without a connection (WEBHOOK_KEYS, endpoints registered by hand). */
  webhookKeys: boolean;
}

/** The default stall: a running projector applies a waiting entry within a page, far below this. */
export const PROJECTOR_STALL_MS = 30_000;

/**
 * The status as `menu-sync status --json` prints it and `GET /api/v1/status` answers it
 * (docs/reference.md §10): what the console counts and colours comes from here, so the CLI and the
 * console cannot disagree.
 */
export interface StatusReport {
  ok: boolean;
  attention: string[];
  /** How many of `attention` each part holds (no connected account counts under connections): the console's red counts. */
  counts: { connections: number; projections: number; sinks: number; reconcile: number };
  at: string;
  connections: Array<{
    id: number;
    state: string;
    /** A sandbox connection retired for a newer emulator: history, not a fault. */
    retired: boolean;
    attention: boolean;
    owner_id: string | null;
    sandbox: boolean;
    token_expires_at: string;
    last_error: string | null;
    subscriptions: number;
    subscription: { id: number; status: string; last_error: string | null } | null;
  }>;
  projections: Array<{
    name: string;
    position: number;
    head: number;
    lag: number;
    lag_before: number;
    parked: number;
    last_error: string | null;
    waiting_since: string | null;
    attention: boolean;
  }>;
  sinks: {
    total: number;
    by_state: Record<string, number>;
    /** How many sinks need attention; `needing_attention` names the first of them, longest failing first. */
    attention: number;
    needing_attention: Array<{
      id: string;
      kind: string;
      state: string;
      failing_since: string | null;
      last_success_at: string | null;
      last_error: string | null;
    }>;
  } | null;
  last_reconcile: { id: number; trigger: string; outcome: string; started_at: string; errors: string[] } | null;
  /** Reconcile's per-store schedule, as `GET /api/v1/reconcile/runs` shows it (docs/reference.md §13). */
  reconcile: { stores_done: number; stores_pending: number; stores_failing: number; next_due_at: string | null } | null;
  /** The log's archive (docs/reference.md §8): null when the database has none. */
  archive: {
    horizon: number;
    as_of_before: string | null;
    files: number;
    bytes: number;
    newest_file: string | null;
    restored: number;
  } | null;
  quarantined: number;
}

const iso = (date: Date | null) => (date === null ? null : date.toISOString());

/** The progress fields as `/api/v1/reconcile/runs` and the status report show them. */
export function reconcileProgressJson(progress: ReconcileProgressRow | undefined): StatusReport['reconcile'] {
  if (progress === undefined) return null;
  return {
    stores_done: progress.storesDone,
    stores_pending: progress.storesPending,
    stores_failing: progress.storesFailing,
    next_due_at: iso(progress.nextDueAt),
  };
}

/** A sandbox connection retired for a newer emulator: history, not a fault. */
const retiredSandbox = (connection: ConnectionStatusRow) => connection.sandbox && connection.state !== 'active';

/** Why a connection needs an operator, or null. */
function connectionReason(connection: ConnectionStatusRow): string | null {
  if (retiredSandbox(connection)) return null;
  if (connection.state === 'reauthorization_required')
    return `connection ${connection.id} needs reauthorization${connection.lastError ? `: ${connection.lastError}` : ''}`;
  const newest = connection.newestSubscription;
  if (newest === null) return `connection ${connection.id}: no webhook subscription (run \`menu-sync subscribe\`)`;
  if (newest.status !== 'registered')
    return `connection ${connection.id}: webhook subscription ${newest.id} is ${newest.status}${newest.lastError ? ` (${newest.lastError})` : ''}`;
  return null;
}

/** Why a projection needs an operator (none: empty). */
function projectionReasons(
  projection: ProjectionStatusRow,
  later: { position: number; lag: number } | undefined,
  at: Date,
  thresholds: StatusThresholds,
): string[] {
  const reasons: string[] = [];
  if (projection.parked > 0)
    reasons.push(
      `projection ${projection.name}: ${projection.parked} parked event(s)${projection.lastError ? ` (${projection.lastError})` : ''}`,
    );
  const lag = later?.lag ?? projection.lag;
  const stalled =
    projection.waitingSince !== null &&
    at.getTime() - projection.waitingSince.getTime() >= thresholds.stallMs &&
    at.getTime() - projection.checkpointMovedAt.getTime() >= thresholds.stallMs;
  if (later && later.lag > projection.lag && later.position === projection.position) {
    reasons.push(
      `projection ${projection.name}: lag growing (${projection.lag} → ${later.lag}) and the projector is not moving`,
    );
  } else if (stalled) {
    const seconds = Math.round((at.getTime() - projection.waitingSince!.getTime()) / 1000);
    reasons.push(`projection ${projection.name}: ${lag} event(s) waiting ${seconds} s and the projector is not moving`);
  } else if (lag >= thresholds.lagEvents) {
    reasons.push(`projection ${projection.name}: lag ${lag} events (threshold ${thresholds.lagEvents})`);
  }
  return reasons;
}

type Part<K extends keyof StatusReport> = { shown: StatusReport[K]; reasons: string[] };

function connectionsPart(snapshot: StatusSnapshot, thresholds: StatusThresholds): Part<'connections'> {
  const reasons: string[] = [];
  if (snapshot.connections.every(retiredSandbox) && !thresholds.webhookKeys)
    reasons.push('no account connected: connect one at /auth/connect or with `menu-sync auth url`');
  const shown = snapshot.connections.map((connection) => {
    const reason = connectionReason(connection);
    if (reason !== null) reasons.push(reason);
    const newest = connection.newestSubscription;
    return {
      id: connection.id,
      state: connection.state,
      retired: retiredSandbox(connection),
      attention: reason !== null,
      owner_id: connection.ownerId,
      sandbox: connection.sandbox,
      token_expires_at: connection.expiresAt.toISOString(),
      last_error: connection.lastError,
      subscriptions: connection.subscriptions,
      subscription: newest && { id: newest.id, status: newest.status, last_error: newest.lastError },
    };
  });
  return { shown, reasons };
}

function projectionsPart(snapshot: StatusSnapshot, thresholds: StatusThresholds): Part<'projections'> {
  const reasons: string[] = [];
  const shown = snapshot.projections.map((projection) => {
    const later = snapshot.later?.find((item) => item.name === projection.name);
    const own = projectionReasons(projection, later, snapshot.at, thresholds);
    reasons.push(...own);
    return {
      name: projection.name,
      position: later?.position ?? projection.position,
      head: projection.head,
      lag: later?.lag ?? projection.lag,
      lag_before: projection.lag,
      parked: projection.parked,
      last_error: projection.lastError,
      waiting_since: iso(projection.waitingSince),
      attention: own.length > 0,
    };
  });
  return { shown, reasons };
}

function sinksPart(sinks: SinkStatusCounts | undefined): Part<'sinks'> {
  if (sinks === undefined) return { shown: null, reasons: [] };
  const reasons = sinks.needingAttention.map(
    (sink) =>
      `sink ${sink.id} ${sink.state}${sink.lastSuccessAt === null ? ', never delivered' : ''}` +
      `${sink.failingSince ? `, failing since ${sink.failingSince.toISOString()}` : ''}${sink.lastError ? `: ${sink.lastError}` : ''}`,
  );
  if (sinks.attention > sinks.needingAttention.length)
    reasons.push(`${sinks.attention - sinks.needingAttention.length} more sink(s) need attention`);
  const shown = {
    total: sinks.total,
    by_state: sinks.byState,
    attention: sinks.attention,
    needing_attention: sinks.needingAttention.map((sink) => ({
      id: sink.id,
      kind: sink.kind,
      state: sink.state,
      failing_since: iso(sink.failingSince),
      last_success_at: iso(sink.lastSuccessAt),
      last_error: sink.lastError,
    })),
  };
  return { shown, reasons };
}

/** The one computation of what needs attention (docs/reference.md §10), and the report that shows it. */
export function statusReport(snapshot: StatusSnapshot, thresholds: StatusThresholds): StatusReport {
  const connections = connectionsPart(snapshot, thresholds);
  const projections = projectionsPart(snapshot, thresholds);
  const sinks = sinksPart(snapshot.sinks);
  const run = snapshot.lastReconcile;
  const reconcile = run?.outcome === 'failed' ? [`last reconcile run (#${run.id}) failed`] : [];
  const attention = [...connections.reasons, ...projections.reasons, ...sinks.reasons, ...reconcile];
  return {
    ok: attention.length === 0,
    attention,
    counts: {
      connections: connections.reasons.length,
      projections: projections.shown.filter((projection) => projection.attention).length,
      sinks: snapshot.sinks?.attention ?? 0,
      reconcile: reconcile.length,
    },
    at: snapshot.at.toISOString(),
    connections: connections.shown,
    projections: projections.shown,
    sinks: sinks.shown,
    last_reconcile: run
      ? { id: run.id, trigger: run.trigger, outcome: run.outcome, started_at: run.startedAt, errors: run.errors }
      : null,
    reconcile: reconcileProgressJson(snapshot.reconcileProgress),
    archive: archiveJson(snapshot.archive),
    quarantined: snapshot.quarantined,
  };
}

function archiveJson(archive: ArchiveStatusRow | undefined): StatusReport['archive'] {
  if (archive === undefined) return null;
  return {
    horizon: archive.horizon,
    as_of_before: iso(archive.asOfBefore),
    files: archive.files,
    bytes: archive.bytes,
    newest_file: archive.newestFile,
    restored: archive.restored,
  };
}

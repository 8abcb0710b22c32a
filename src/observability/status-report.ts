import type { ConnectionStatusRow, SinkStatusRow } from './status.repository.js';

/** What `menu-sync status` saw: two samples of the projections, taken `intervalMs` apart. */
export interface StatusSnapshot {
  at: Date;
  connections: ConnectionStatusRow[];
  projections: Array<{
    name: string;
    position: number;
    head: number;
    lag: number;
    parked: number;
    lastError: string | null;
  }>;
  /** The same projections a moment later (lag growing while the position stands still). */
  later: Array<{ name: string; position: number; lag: number }>;
  sinks: SinkStatusRow[] | undefined;
  lastReconcile: { id: number; trigger: string; outcome: string; startedAt: string; errors: string[] } | undefined;
  quarantined: number;
}

export interface StatusThresholds {
  /** A lag at or above this needs attention whatever its trend. */
  lagEvents: number;
}

/**
 * Why an operator should look (empty: all is well). A connection of the sandbox that was retired
 * for a newer emulator is history, not a fault.
 */
export function needsAttention(snapshot: StatusSnapshot, thresholds: StatusThresholds): string[] {
  const reasons: string[] = [];
  for (const connection of snapshot.connections) {
    if (connection.state === 'reauthorization_required' && !connection.sandbox) {
      reasons.push(
        `connection ${connection.id} needs reauthorization${connection.lastError ? `: ${connection.lastError}` : ''}`,
      );
    }
    if (connection.state === 'active' && connection.failedSubscriptions > 0) {
      reasons.push(
        `connection ${connection.id}: ${connection.failedSubscriptions} webhook subscription(s) failed to register`,
      );
    }
  }
  for (const projection of snapshot.projections) {
    const later = snapshot.later.find((item) => item.name === projection.name);
    if (projection.parked > 0)
      reasons.push(
        `projection ${projection.name}: ${projection.parked} parked event(s)${projection.lastError ? ` (${projection.lastError})` : ''}`,
      );
    if (later && later.lag > projection.lag && later.position === projection.position) {
      reasons.push(
        `projection ${projection.name}: lag growing (${projection.lag} → ${later.lag}) and the projector is not moving`,
      );
    } else if ((later?.lag ?? projection.lag) >= thresholds.lagEvents) {
      reasons.push(
        `projection ${projection.name}: lag ${later?.lag ?? projection.lag} events (threshold ${thresholds.lagEvents})`,
      );
    }
  }
  for (const sink of snapshot.sinks ?? []) {
    if (sink.state === 'failing') reasons.push(`sink ${sink.id} failing${sink.lastError ? `: ${sink.lastError}` : ''}`);
  }
  if (snapshot.lastReconcile?.outcome === 'failed')
    reasons.push(`last reconcile run (#${snapshot.lastReconcile.id}) failed`);
  return reasons;
}

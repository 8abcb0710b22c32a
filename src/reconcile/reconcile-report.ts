export type RunOutcome = 'ok' | 'partial' | 'failed' | 'skipped';
export type DifferenceKind = 'created' | 'updated' | 'destroyed';

/** What reconcile did for one connection and store (docs/reference.md §8). */
export interface StoreReport {
  connection_id: number;
  store_id: string;
  owner_id: string | null;
  /** Resources read from the upstream, by type. */
  checked: Record<string, number>;
  /** Differences found, by kind and type. */
  differences: Record<DifferenceKind, Record<string, number>>;
  events_appended: number;
  /** Failed or unrecognised answers, skipped documents: each a sentence. */
  errors: string[];
  /** Decisions worth knowing, e.g. destroys left out of an implausible snapshot. */
  notes: string[];
  /** The store's snapshot fetch, its retries included, and the comparison and append. */
  duration_ms: number;
}

/** One run, as `GET /api/v1/reconcile/runs` lists it. */
export interface ReconcileRun {
  id: number;
  trigger: string;
  started_at: string;
  finished_at: string;
  outcome: RunOutcome;
  stores: StoreReport[];
  /** Errors not tied to one store (a connection whose grant was revoked during the run …). */
  errors: string[];
  /** Run-level notes: parked events retried, connections skipped for a known reason (owner or stores not known yet, reauthorization required) …. */
  notes: string[];
}

export function emptyStoreReport(connectionId: number, storeId: string, ownerId: string | null): StoreReport {
  return {
    connection_id: connectionId,
    store_id: storeId,
    owner_id: ownerId,
    checked: {},
    differences: { created: {}, updated: {}, destroyed: {} },
    events_appended: 0,
    errors: [],
    notes: [],
    duration_ms: 0,
  };
}

/** A run in progress: filled as the connections are reconciled, so a run stopped midway still reports what it did. */
export interface RunContext {
  runId: string;
  errors: string[];
  notes: string[];
  stores: StoreReport[];
  /** Stores that answered 403/404: not the connection's owner's, settled without a report. */
  notOwned: Array<{ connectionId: number; storeId: string }>;
}

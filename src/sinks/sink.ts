import type { ChangePosition } from '../changes/change.js';

export const SINK_KINDS = ['http', 'nats', 'postgres', 'mysql'] as const;
export type SinkKind = (typeof SINK_KINDS)[number];

/** How a table sink lays out its tables (docs/reference.md §12): `document` (the default) or `relational`. */
export const TABLE_LAYOUTS = ['document', 'relational'] as const;
export type TableLayout = (typeof TABLE_LAYOUTS)[number];

export const SINK_STATES = ['active', 'retrying', 'disabled', 'failing'] as const;
export type SinkState = (typeof SINK_STATES)[number];

export const DEFAULT_BATCH_SIZE = 100;
export const DEFAULT_TIMEOUT_MS = 15_000;
export const DEFAULT_STREAM = 'MENU_SYNC';
export const DEFAULT_SUBJECT_PREFIX = 'menu';
/** How long the previous secret keeps signing after a rotation (docs/reference.md §11). */
export const SECRET_OVERLAP_MS = 24 * 60 * 60 * 1000;

/** A sink as stored, secrets opened (never shown by the API, only used to sign). */
export interface Sink {
  id: string;
  kind: SinkKind;
  /** http: where batches go; postgres, mysql: the target's URL with its password masked. */
  url: string | null;
  /** postgres, mysql: the target's URL, password included (sealed at rest); null if it cannot be opened. */
  targetUrl: string | null;
  /** postgres: the target schema. */
  schema: string | null;
  /** mysql: the prefix of the target tables. */
  tablePrefix: string | null;
  /** postgres, mysql: the layout of the target tables, fixed at creation. */
  layout: TableLayout | null;
  stream: string | null;
  subjectPrefix: string | null;
  /** null: the types of CHANGES_TYPES (AppConfig.changeTypes). */
  types: string[] | null;
  /** null: every owner. */
  ownerIds: string[] | null;
  batchSize: number;
  timeoutMs: number;
  /** The change-log position its target acknowledged up to; START before the first. */
  cursor: ChangePosition;
  state: SinkState;
  failingSince: Date | null;
  lastSuccessAt: Date | null;
  lastError: string | null;
  nextAttemptAt: Date | null;
  attempts: number;
  /** Replays so far: part of every webhook-id, so a replayed batch is not taken for a duplicate. */
  epoch: number;
  /** Started from `snapshot`: the boundary up to which its cursor walks the snapshot (sink-start.ts); else null. */
  snapshotTo: ChangePosition | null;
  /** The end of the batch being retried (its webhook-id depends on it). */
  inflight: ChangePosition | null;
  secret: string | null;
  previousSecret: string | null;
  previousSecretExpiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

/** A sink's lag as counted for the API: `capped` when the count stopped at its bound (at least `lag` behind). */
export interface LagCount {
  lag: number;
  capped: boolean;
}

/** What a delivery failure leaves on the sink. */
export interface SinkFailure {
  error: string;
  nextAttemptAt: Date;
  state: Extract<SinkState, 'retrying' | 'failing' | 'disabled'>;
  failingSince: Date;
  inflight: ChangePosition | null;
}

/** The state after a failure: `failing` once the failures have lasted `failingAfterMs`. */
export function stateAfterFailure(failingSince: Date, now: Date, failingAfterMs: number): 'retrying' | 'failing' {
  return now.getTime() - failingSince.getTime() >= failingAfterMs ? 'failing' : 'retrying';
}

import type { ChangeEntry, ChangePosition } from '../../changes/change.js';
import type { TableLayout } from '../sink.js';
import type { RowCounts, TargetCursor } from './table-batch.js';
import type { TableTarget } from './table-target.js';
import type { Refill } from './table-refill.js';
import type { LiveResources } from './table-refill.repository.js';

/** One batch for a target: its changes after `expected` (the sink's cursor), in reader order. */
export interface TableBatch {
  sinkId: string;
  epoch: number;
  /** The types the sink follows: each has its table, created before the first write. */
  types: readonly string[];
  expected: ChangePosition;
  entries: ChangeEntry[];
  /** The owners the sink follows (null: all), and the boundary of the snapshot it is delivering (null: none). */
  ownerIds: readonly string[] | null;
  snapshotTo: ChangePosition | null;
  /** Where a table the sink wrote before and found missing is re-filled from. */
  live: LiveResources;
}

export type ApplyResult =
  /** `refills`: the columns and tables found missing that the client re-added and re-filled with the batch. */
  | { kind: 'applied'; rows: RowCounts; refills?: Refill[] }
  /** The target's cursor already covered the batch: nothing of it was written (tables found missing were re-filled). */
  | { kind: 'already'; refills?: Refill[] }
  /** The target's cursor stands before the sink's: nothing was written, the sink resumes from it. */
  | { kind: 'behind'; target: ChangePosition };

/**
 * A connection pool to one target database (docs/reference.md §12). `apply` writes a batch and the
 * sink's cursor in one transaction of the target; what it throws is the database's error.
 */
export interface TableClient {
  /** `PostgreSQL` or `MySQL`: how errors name the target. */
  readonly database: string;
  apply(batch: TableBatch): Promise<ApplyResult>;
  targetCursor(sinkId: string): Promise<TargetCursor | null>;
  close(): Promise<void>;
}

/** How a client reaches its target. */
export interface TableClientOptions {
  target: TableTarget;
  /** The address to connect to, resolved and judged by the egress guard again for every new connection. */
  resolve: () => Promise<string>;
  /** Connection, statement and lock timeouts. */
  timeoutMs: number;
  /** The tables it writes; `document` when absent. */
  layout?: TableLayout;
}

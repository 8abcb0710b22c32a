import type { ApiResource } from '../projection/api-resource.js';

/** A change of the change log (reference §11): a resource's new state, as `GET /api/v1/{type}/{id}` shows it. */
export interface Change {
  seq: number;
  change_id: string;
  type: string;
  id: string;
  owner_id: string | null;
  op: 'upsert' | 'delete';
  resource: ApiResource;
  /** ISO 8601: when the change was written. */
  at: string;
}

/** A change with its position in reader order, from which its cursor is made. */
export interface ChangeEntry {
  change: Change;
  position: ChangePosition;
}

/** A reader's place in the change log: (transaction id, seq), compared in that order. */
export interface ChangePosition {
  transactionId: string;
  seq: string;
}

export const START: ChangePosition = { transactionId: '0', seq: '0' };

export interface ChangePage {
  changes: ChangeEntry[];
  /** Where the next read starts: past every change read, or past the readable log when the filters left fewer than `limit`. */
  next: ChangePosition;
  /** The compaction horizon in the snapshot the changes were read in: a cursor below it has lost changes. */
  compactedTo: ChangePosition;
}

export interface ChangeFilter {
  limit: number;
  /** Resource types (`product`, …); absent: all. */
  types?: readonly string[];
  ownerIds?: readonly string[];
}

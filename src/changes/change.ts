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

/**
 * A change as the JSON text a push sink sends (`json`: the `Change` as the feed shows it, built by
 * PostgreSQL and around it, never parsed), with what routes and records it.
 */
export interface ChangeText {
  position: ChangePosition;
  seq: number;
  changeId: string;
  type: string;
  id: string;
  ownerId: string | null;
  json: string;
}

export const START: ChangePosition = { transactionId: '0', seq: '0' };

export interface ChangePage<T = ChangeEntry> {
  changes: T[];
  /** Where the next read starts: past every change read, or past the readable log when the filters left fewer than `limit`. */
  next: ChangePosition;
  /** The compaction horizon in the snapshot the changes were read in: a cursor below it has lost changes. */
  compactedTo: ChangePosition;
  /** The readers' horizon the page was read below (absent for a snapshot's page): see `ChangeFilter.horizon`. */
  horizon?: string;
}

export interface ChangeFilter {
  limit: number;
  /** Resource types (`product`, …); absent: all. */
  types?: readonly string[];
  ownerIds?: readonly string[];
  /**
   * A horizon an earlier page answered: no transaction below it was open then, and every later one
   * has a higher id, so it stays safe to read below. A page read below it comes out as it would below
   * the current horizon when it is full (keyset order puts every change below it first); a short one
   * is read again below the current horizon.
   */
  horizon?: string;
}

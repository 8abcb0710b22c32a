import type { Change, ChangeEntry, ChangePosition } from '../../changes/change.js';
import { comparePositions, decodeChangeCursor, encodeChangeCursor } from '../../changes/change-cursor.js';
import { tlsReason } from '../../database/database-tls.js';

/** What the target's `menu_sync_sink_cursors` row says: how far it applied, in which replay epoch of the sink. */
export interface TargetCursor {
  cursor: ChangePosition;
  epoch: number;
}

export const encodeTargetCursor = encodeChangeCursor;
export const decodeTargetCursor = (text: string): ChangePosition => decodeChangeCursor(text, 'cursor');

/** What to do with a batch, given the target's cursor read (locked) in the transaction that would apply it. */
export type BatchPlan =
  | { kind: 'apply'; entries: ChangeEntry[] }
  /** The target applied the whole batch already (menu-sync stopped before it recorded that). */
  | { kind: 'applied' }
  /** The target stands before the sink's cursor (restored from a backup?): the sink must resume from it. */
  | { kind: 'behind'; target: ChangePosition };

/**
 * Exactly-once effect (docs/reference.md §12): within one replay epoch the target's cursor is the
 * truth, and what it covers is never applied again. A new epoch (a replay, a restart below the
 * compaction horizon) applies the batch whatever the target's cursor says: the rows' seq keeps
 * each row at its newest change.
 */
export function planBatch(
  target: TargetCursor | null,
  epoch: number,
  expected: ChangePosition,
  entries: ChangeEntry[],
): BatchPlan {
  if (target === null || target.epoch !== epoch) return { kind: 'apply', entries };
  const last = entries[entries.length - 1].position;
  if (comparePositions(target.cursor, last) >= 0) return { kind: 'applied' };
  const order = comparePositions(target.cursor, expected);
  if (order < 0) return { kind: 'behind', target: target.cursor };
  if (order === 0) return { kind: 'apply', entries };
  return { kind: 'apply', entries: entries.filter((entry) => comparePositions(entry.position, target.cursor) > 0) };
}

/** The newest change of each row of a batch, grouped by type (a row is type, owner and id), in seq order. */
export function changesByType(entries: readonly ChangeEntry[]): Map<string, Change[]> {
  const newest = new Map<string, Change>();
  for (const { change } of entries) {
    const key = `${change.type}\u0000${change.owner_id ?? ''}\u0000${change.id}`;
    const known = newest.get(key);
    if (known === undefined || known.seq < change.seq) newest.set(key, change);
  }
  const byType = new Map<string, Change[]>();
  for (const change of [...newest.values()].sort((a, b) => a.seq - b.seq)) {
    const list = byType.get(change.type) ?? [];
    list.push(change);
    byType.set(change.type, list);
  }
  return byType;
}

/** What a committed batch applied: the newest change of each row of a followed type, an upsert or a delete. */
export interface RowCounts {
  upserts: number;
  deletes: number;
}

/** Adds a type's changes (one per row, as changesByType gives them) to `rows`. */
export function countRows(rows: RowCounts, changes: readonly Change[]): RowCounts {
  for (const change of changes) {
    if (change.op === 'delete') rows.deletes++;
    else rows.upserts++;
  }
  return rows;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * A committed batch as its attempt shows it (docs/reference.md §12): status `committed`, and as the
 * target's answer the changes its transaction applied, one per row (a row already at a newer change
 * stays as it is); null: the target had committed the batch before (its cursor covers it).
 */
export function committedAnswer(rows: RowCounts | null): { status: 'committed'; response: string } {
  if (rows === null)
    return { status: 'committed', response: "committed before: the target's cursor covers this batch" };
  const changes = plural(rows.upserts + rows.deletes, 'change');
  return {
    status: 'committed',
    response: `committed: ${changes}, one per row (${plural(rows.upserts, 'upsert')}, ${plural(rows.deletes, 'delete')})`,
  };
}

/** A failed write as the sink shows it: the database's code and message, nothing of the URL. */
export interface DatabaseFailure {
  /** SQLSTATE (PostgreSQL), the server's error number (MySQL), or 0 for a network error or timeout. */
  status: string | number;
  error: string;
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'PROTOCOL_CONNECTION_LOST',
]);

/**
 * `database` is what the target is (`PostgreSQL`, `MySQL`); the password, should a message ever
 * repeat it, is replaced by `***`.
 */
export function describeDatabaseError(database: string, error: unknown, password: string | null): DatabaseFailure {
  const { code, errno, message } = (error ?? {}) as { code?: unknown; errno?: unknown; message?: unknown };
  const text = tlsReason(typeof message === 'string' && message !== '' ? message : String(error));
  const clean = password === null || password === '' ? text : text.split(password).join('***');
  if (typeof code === 'string' && NETWORK_CODES.has(code))
    return { status: 0, error: `${database}: ${code}: cannot reach the database` };
  if (typeof code === 'string' && code !== '') {
    const number = typeof errno === 'number' ? ` (${errno})` : '';
    return { status: typeof errno === 'number' ? errno : code, error: `${database} error ${code}${number}: ${clean}` };
  }
  return { status: 0, error: `${database}: ${clean}` };
}

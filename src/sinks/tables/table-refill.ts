import type { Change } from '../../changes/change.js';
import type { TableColumn, TargetTable } from './table-columns.js';
import { targetRow } from './table-columns.js';
import type { SchemaTable } from './table-schema.js';

/** Rows read and re-filled per statement. */
export const REFILL_PAGE = 500;

/**
 * The columns of a document table that its `resource` column alone gives back, so the sink can
 * re-add one found missing (dropped by hand, or new in this version) and re-fill it: the typed
 * columns, `version_occurred_at` and `synced_at`. The key, `resource` and `seq` are not: a table with
 * rows that lacks one of them is left as it is, and the write fails with the database's error.
 */
export function refillable(table: TargetTable, column: TableColumn): boolean {
  return (
    table.columns.some((typed) => typed.name === column.name) ||
    column.name === 'version_occurred_at' ||
    column.name === 'synced_at'
  );
}

/** A stored row as the refill reads it. */
export interface StoredRow {
  owner_id: string;
  id: string;
  resource: Change['resource'];
}

/** The values of `columns` for a stored row, as a batch would have written them from its resource. */
export function refillValues(table: TargetTable, columns: readonly TableColumn[], row: StoredRow): unknown[] {
  const written = targetRow(table, {
    seq: 0,
    change_id: '',
    type: table.type,
    id: row.id,
    owner_id: row.owner_id,
    op: 'upsert',
    resource: row.resource,
    at: '',
  });
  const all: Record<string, unknown> = { ...written.values, version_occurred_at: written.version_occurred_at };
  return columns.map((column) => all[column.name] ?? null);
}

/** What a client re-added and re-filled before a batch, as its attempt tells it. */
export interface Refill {
  table: string;
  columns: string[];
  rows: number;
}

export function describeRefills(refills: readonly Refill[]): string {
  return refills
    .map(
      (refill) =>
        `re-added ${refill.columns.map((column) => `${refill.table}.${column}`).join(', ')} (missing) and re-filled ${refill.rows} ${refill.rows === 1 ? 'row' : 'rows'} from their resource`,
    )
    .join('; ');
}

/** The columns to add, grouped by table, in the order `schemaWork` gave them. */
export function addedByTable(add: ReadonlyArray<{ table: string; column: TableColumn }>): Map<string, TableColumn[]> {
  const byTable = new Map<string, TableColumn[]>();
  for (const { table, column } of add) byTable.set(table, [...(byTable.get(table) ?? []), column]);
  return byTable;
}

/**
 * Which missing columns of a table to add, and which of them to re-fill: all of them to a table
 * without rows (or the cursors and tombstones); of a document table with rows only those its
 * `resource` gives back, all re-filled; none to a relational table with rows. A column not added
 * leaves the write to fail with the database's error: the sink is `failing` until it is back.
 */
export function planMissing(
  table: SchemaTable | (TargetTable & SchemaTable),
  columns: readonly TableColumn[],
  hasRows: boolean,
): { add: TableColumn[]; refill: TableColumn[] } {
  const typeTable = 'type' in table || 'layout' in table;
  if (!hasRows || !typeTable) return { add: [...columns], refill: [] };
  if (!('type' in table)) return { add: [], refill: [] };
  const refill = columns.filter((column) => refillable(table, column));
  return { add: refill, refill };
}

import type { Change } from '../../changes/change.js';
import type { TableColumn, TargetTable } from './table-columns.js';
import { targetRow } from './table-columns.js';
import type { SchemaTable } from './table-schema.js';
import type { RelationalType } from './relational-tables.js';
import { relationalRows } from './relational-rows.js';

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

/** A stored row as the change that wrote it, for the functions that make a batch's rows. */
export const storedChange = (type: string, row: StoredRow): Change => ({
  seq: 0,
  change_id: '',
  type,
  id: row.id,
  owner_id: row.owner_id,
  op: 'upsert',
  resource: row.resource,
  at: '',
});

/** The values of `columns` for a stored row, as a batch would have written them from its resource. */
export function refillValues(table: TargetTable, columns: readonly TableColumn[], row: StoredRow): unknown[] {
  const written = targetRow(table, storedChange(table.type, row));
  const all: Record<string, unknown> = { ...written.values, version_occurred_at: written.version_occurred_at };
  return columns.map((column) => all[column.name] ?? null);
}

/** What a client re-added (columns) or re-created (a table) and re-filled with a batch, as its attempt tells it. */
export type Refill =
  | { table: string; columns: string[]; rows: number }
  /** `from`: what the rows were made from (the change log at a cursor, or the rows of the type's own table). */
  | { table: string; rows: number; from: string };

export function describeRefills(refills: readonly Refill[]): string {
  return refills
    .map((refill) => {
      const rows = `${refill.rows} ${refill.rows === 1 ? 'row' : 'rows'}`;
      return 'columns' in refill
        ? `re-added ${refill.columns.map((column) => `${refill.table}.${column}`).join(', ')} (missing) and re-filled ${rows} from their resource`
        : `re-created ${refill.table} (missing) and re-filled ${rows} from ${refill.from}`;
    })
    .join('; ');
}

/** The columns to add, grouped by table, in the order `schemaWork` gave them. */
export function addedByTable(add: ReadonlyArray<{ table: string; column: TableColumn }>): Map<string, TableColumn[]> {
  const byTable = new Map<string, TableColumn[]>();
  for (const { table, column } of add) byTable.set(table, [...(byTable.get(table) ?? []), column]);
  return byTable;
}

/** What to do with a table's missing columns: add them, and of them re-fill these, computed by `values`. */
export interface MissingPlan {
  add: TableColumn[];
  refill: TableColumn[];
  /** The values of `refill`'s columns (`synced_at` aside: the target's clock) for a stored row. */
  values: (row: StoredRow) => Record<string, unknown>;
}

const NOT_DERIVED = new Set(['owner_id', 'id', 'resource', 'seq']);

/**
 * Which missing columns of a table to add, and which of them to re-fill: all of them to a table
 * without rows (or the cursors and tombstones); of a type's table with rows (either layout) only
 * those its `resource` gives back, all re-filled; none to a relational child table with rows. A
 * column not added leaves the write to fail with the database's error: `failing` until it is back.
 */
export function planMissing(
  table: SchemaTable | (TargetTable & SchemaTable),
  columns: readonly TableColumn[],
  hasRows: boolean,
  relational: readonly RelationalType[] = [],
): MissingPlan {
  const none = () => ({});
  if (!hasRows || !('type' in table || 'layout' in table)) return { add: [...columns], refill: [], values: none };
  if ('type' in table) {
    const refill = columns.filter((column) => refillable(table, column));
    const values = (row: StoredRow) => {
      const filled = refillValues(table, refill, row);
      return Object.fromEntries(refill.map((column, index) => [column.name, filled[index]]));
    };
    return { add: refill, refill, values };
  }
  const spec = relational.find((candidate) => candidate.table.name === table.name);
  if (spec === undefined) return { add: [], refill: [], values: none };
  const refill = columns.filter((column) => !NOT_DERIVED.has(column.name));
  return { add: refill, refill, values: (row) => relationalRows(spec, storedChange(spec.type, row)).row };
}

import { createHash } from 'node:crypto';
import type { Change } from '../../changes/change.js';
import { allColumns, ColumnKind, TableColumn, TargetTable, targetRow } from './table-columns.js';

/** A row's place in a table: its owner and id. */
export interface RowKey {
  owner_id: string;
  id: string;
}

/** One followed type's table compared with the read model: counts, digests, and the rows that differ. */
export interface TypeComparison {
  type: string;
  table: string;
  api: { rows: number; digest: string };
  target: { rows: number; digest: string };
  equal: boolean;
  /** Live in the read model, absent from the table. */
  missing: RowKey[];
  /** In the table, not live in the read model. */
  extra: RowKey[];
  /** In both, some column different. */
  changed: RowKey[];
}

/** The columns compared: every column but `synced_at` (the target's clock). */
export const comparedColumns = (table: TargetTable): TableColumn[] =>
  allColumns(table).filter((column) => column.name !== 'synced_at');

const canonical = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  return JSON.stringify(value ?? null);
};

/** A MySQL DATETIME(3) as text (`2024-01-01 09:30:00.000`, UTC), a Date, or ISO 8601 text: ISO 8601 in ms. */
function timestamp(value: unknown): string | null {
  if (value instanceof Date) return value.toISOString();
  const text = String(value);
  const date = new Date(/^\d{4}-\d{2}-\d{2} /.test(text) ? `${text.replace(' ', 'T')}Z` : text);
  return Number.isNaN(date.getTime()) ? text : date.toISOString();
}

/** A column's value as both databases' drivers and the batch's rows compare: one form per kind. */
export function normalised(kind: ColumnKind, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (kind) {
    case 'text':
      return String(value);
    case 'integer':
    case 'number':
      return Number(value);
    case 'boolean':
      return typeof value === 'boolean' ? value : Number(value) !== 0;
    case 'timestamp':
      return timestamp(value);
    case 'json':
      return canonical(typeof value === 'string' ? (JSON.parse(value) as unknown) : value);
  }
}

/** A stored row's compared columns in order, normalised (a column the table lacks counts as null). */
export function storedRow(table: TargetTable, row: Record<string, unknown>): unknown[] {
  return comparedColumns(table).map((column) => normalised(column.kind, row[column.name]));
}

/** The row a batch writes for the newest change of a resource, as `storedRow` gives it back. */
export function expectedRow(table: TargetTable, change: Change): unknown[] {
  const row = targetRow(table, change);
  const all: Record<string, unknown> = {
    ...row.values,
    owner_id: row.owner_id,
    id: row.id,
    resource: row.resource,
    version_occurred_at: row.version_occurred_at,
    seq: row.seq,
  };
  return comparedColumns(table).map((column) => normalised(column.kind, all[column.name]));
}

const keyOf = (key: RowKey) => `${key.owner_id}\u0000${key.id}`;
const keyFrom = (text: string): RowKey => {
  const [owner_id, id] = text.split('\u0000');
  return { owner_id, id };
};

/** The digest of a set of rows, whatever their order: sha256 of their keys and values, sorted. */
function digest(rows: ReadonlyMap<string, unknown[]>): string {
  const hash = createHash('sha256');
  for (const key of [...rows.keys()].sort()) hash.update(`${key}\u0001${canonical(rows.get(key))}\n`);
  return hash.digest('hex').slice(0, 16);
}

/** Compares one table's rows with the rows the read model's newest changes give, by key. */
export function compareTable(
  table: TargetTable & { name: string },
  expected: readonly Change[],
  stored: ReadonlyArray<Record<string, unknown>>,
): TypeComparison {
  const want = new Map(
    expected.map((change) => [keyOf({ owner_id: change.owner_id ?? '', id: change.id }), expectedRow(table, change)]),
  );
  const have = new Map(
    stored.map((row) => [keyOf({ owner_id: String(row.owner_id), id: String(row.id) }), storedRow(table, row)]),
  );
  const missing: RowKey[] = [];
  const changed: RowKey[] = [];
  for (const [key, row] of want) {
    const found = have.get(key);
    if (found === undefined) missing.push(keyFrom(key));
    else if (canonical(found) !== canonical(row)) changed.push(keyFrom(key));
  }
  const extra = [...have.keys()].filter((key) => !want.has(key)).map(keyFrom);
  const order = (keys: RowKey[]) => keys.sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
  const api = { rows: want.size, digest: digest(want) };
  const target = { rows: have.size, digest: digest(have) };
  return {
    type: table.type,
    table: table.name,
    api,
    target,
    equal: api.digest === target.digest,
    missing: order(missing),
    extra: order(extra),
    changed: order(changed),
  };
}

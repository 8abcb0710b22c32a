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
      // Text, so a bigint beyond 2^53 compares exactly.
      return String(value);
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

/** A table as `sinks verify` compares it: its compared columns, its key, and the column naming the resource a row belongs to. */
export interface ComparedTable {
  type: string;
  name: string;
  columns: readonly TableColumn[];
  key: readonly string[];
  /** `id` in a type's table, `<type>_id` in a child table. */
  parent: string;
}

/** A document table as compared. */
export const documentTable = (table: TargetTable & { name: string }): ComparedTable => ({
  type: table.type,
  name: table.name,
  columns: comparedColumns(table),
  key: ['owner_id', 'id'],
  parent: 'id',
});

/** The row a document batch writes for the newest change of a resource, by column name. */
export function documentRow(table: TargetTable, change: Change): Record<string, unknown> {
  const row = targetRow(table, change);
  return {
    ...row.values,
    owner_id: row.owner_id,
    id: row.id,
    resource: row.resource,
    version_occurred_at: row.version_occurred_at,
    seq: row.seq,
  };
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

/** A row's key as a RowKey (the key's columns after the owner joined by `/`) and its resource's key. */
function rowKeys(table: ComparedTable, row: Record<string, unknown>): { key: string; parent: string } {
  const part = (name: string) => String(normalised('text', row[name]));
  const owner = part('owner_id');
  const rest = table.key.filter((name) => name !== 'owner_id').map(part);
  return {
    key: keyOf({ owner_id: owner, id: rest.join('/') }),
    parent: keyOf({ owner_id: owner, id: part(table.parent) }),
  };
}

/**
 * Compares a table's stored rows with the rows the read model's newest changes give, by key;
 * `parents` are the resources whose rows differ, for `--repair`.
 */
export function compareRows(
  table: ComparedTable,
  expected: ReadonlyArray<Record<string, unknown>>,
  stored: ReadonlyArray<Record<string, unknown>>,
): TypeComparison & { parents: RowKey[] } {
  const values = (row: Record<string, unknown>) =>
    table.columns.map((column) => normalised(column.kind, row[column.name]));
  const index = (rows: ReadonlyArray<Record<string, unknown>>) => {
    const byKey = new Map<string, unknown[]>();
    const parents = new Map<string, string>();
    for (const row of rows) {
      const { key, parent } = rowKeys(table, row);
      byKey.set(key, values(row));
      parents.set(key, parent);
    }
    return { byKey, parents };
  };
  const want = index(expected);
  const have = index(stored);
  const missing: string[] = [];
  const changed: string[] = [];
  for (const [key, row] of want.byKey) {
    const found = have.byKey.get(key);
    if (found === undefined) missing.push(key);
    else if (canonical(found) !== canonical(row)) changed.push(key);
  }
  const extra = [...have.byKey.keys()].filter((key) => !want.byKey.has(key));
  const parents = new Set([
    ...[...missing, ...changed].map((key) => want.parents.get(key)!),
    ...extra.map((key) => have.parents.get(key)!),
  ]);
  const keys = (list: string[]) => list.sort().map(keyFrom);
  const api = { rows: want.byKey.size, digest: digest(want.byKey) };
  const target = { rows: have.byKey.size, digest: digest(have.byKey) };
  return {
    type: table.type,
    table: table.name,
    api,
    target,
    equal: api.digest === target.digest,
    missing: keys(missing),
    extra: keys(extra),
    changed: keys(changed),
    parents: keys([...parents]),
  };
}

/** Compares one document table with the read model's newest changes of its type. */
export function compareTable(
  table: TargetTable & { name: string },
  expected: readonly Change[],
  stored: ReadonlyArray<Record<string, unknown>>,
): TypeComparison {
  const { parents: _parents, ...comparison } = compareRows(
    documentTable(table),
    expected.map((change) => documentRow(table, change)),
    stored,
  );
  return comparison;
}

import { allColumns, TableColumn, targetTable, TargetTable } from './table-columns.js';

/** A table the sink keeps in the target, as created: its columns in order and its primary key. */
export interface SchemaTable {
  name: string;
  columns: readonly TableColumn[];
  primaryKey: readonly string[];
}

export const CURSORS_TABLE = 'menu_sync_sink_cursors';
export const TOMBSTONES_TABLE = 'menu_sync_tombstones';

const CURSOR_COLUMNS: readonly TableColumn[] = [
  { name: 'sink_id', kind: 'text' },
  { name: 'cursor', kind: 'text' },
  { name: 'epoch', kind: 'integer' },
  { name: 'updated_at', kind: 'timestamp' },
];
/** A deleted row's last delete, so that an older upsert replayed later cannot bring it back. */
const TOMBSTONE_COLUMNS: readonly TableColumn[] = [
  { name: 'type', kind: 'text' },
  { name: 'owner_id', kind: 'text' },
  { name: 'id', kind: 'text' },
  { name: 'seq', kind: 'integer' },
];

/**
 * The tables of a sink following `types`: the cursors, the tombstones, and one per type, named
 * `prefix` + its plural (MySQL, whose tables share the URL's database; PostgreSQL's have a schema).
 */
export function sinkTables(
  types: readonly string[],
  prefix: string,
): { cursors: SchemaTable; tombstones: SchemaTable; tables: Map<string, TargetTable & SchemaTable> } {
  const tables = new Map<string, TargetTable & SchemaTable>();
  for (const type of types) {
    const table = targetTable(type);
    const name = `${prefix}${table.name}`;
    tables.set(type, { ...table, name, columns: table.columns, primaryKey: ['owner_id', 'id'] });
  }
  return {
    cursors: { name: CURSORS_TABLE, columns: CURSOR_COLUMNS, primaryKey: ['sink_id'] },
    tombstones: {
      name: prefix === '' ? TOMBSTONES_TABLE : `${prefix}tombstones`,
      columns: TOMBSTONE_COLUMNS,
      primaryKey: ['type', 'owner_id', 'id'],
    },
    tables,
  };
}

/** Every column of a schema table: a type's table has its key, typed and trailing columns. */
export function schemaColumns(table: SchemaTable | (TargetTable & SchemaTable)): TableColumn[] {
  return 'type' in table ? allColumns(table) : [...table.columns];
}

/** What the target lacks: tables to create, and columns to add to tables that exist (nothing is ever dropped). */
export function schemaWork(
  existing: ReadonlyMap<string, ReadonlySet<string>>,
  wanted: ReadonlyArray<SchemaTable | (TargetTable & SchemaTable)>,
): {
  create: Array<{ table: SchemaTable; columns: TableColumn[] }>;
  add: Array<{ table: string; column: TableColumn }>;
} {
  const create: Array<{ table: SchemaTable; columns: TableColumn[] }> = [];
  const add: Array<{ table: string; column: TableColumn }> = [];
  for (const table of wanted) {
    const columns = schemaColumns(table);
    const present = existing.get(table.name);
    if (present === undefined) create.push({ table, columns });
    else for (const column of columns) if (!present.has(column.name)) add.push({ table: table.name, column });
  }
  return { create, add };
}

import type { Change, ChangePosition } from '../../changes/change.js';
import { encodeChangeCursor } from '../../changes/change-cursor.js';
import type { TargetCursor } from './table-batch.js';
import type { TargetTable } from './table-columns.js';
import type { LiveResources } from './table-refill.repository.js';
import { Refill, storedChange, StoredRow } from './table-refill.js';
import type { SchemaTable } from './table-schema.js';
import { relationalRows, RelationalRow } from './relational-rows.js';
import { RelationalTable, RelationalType, relationalType } from './relational-tables.js';

/** A followed type some of whose tables the sink had written and found missing (docs/reference.md §12). */
export interface Recreation {
  type: string;
  layout: { kind: 'document'; table: TargetTable & SchemaTable } | { kind: 'relational'; spec: RelationalType };
  /** The tables found missing, as created: the type's own, its child tables, or both. */
  missing: SchemaTable[];
}

/**
 * The types whose tables are among `missing` (tables the sink wrote before: the target holds its
 * cursor), in `types` order. The cursors and tombstones are not re-filled: a sink without its
 * cursor row starts as a new one.
 */
export function recreations(
  types: readonly string[],
  documentTables: ReadonlyMap<string, TargetTable & SchemaTable>,
  relational: boolean,
  prefix: string,
  missing: readonly SchemaTable[],
): Recreation[] {
  const found = new Map(missing.map((table) => [table.name, table]));
  const result: Recreation[] = [];
  for (const type of types) {
    const layout: Recreation['layout'] = relational
      ? { kind: 'relational', spec: relationalType(type, prefix) }
      : { kind: 'document', table: documentTables.get(type)! };
    const names =
      layout.kind === 'relational'
        ? [layout.spec.table.name, ...layout.spec.children.map((child) => child.table.name)]
        : [layout.table.name];
    const tables = names.flatMap((name) => (found.has(name) ? [found.get(name)!] : []));
    if (tables.length > 0) result.push({ type, layout, missing: tables });
  }
  return result;
}

/** What a target client tells `targetRecreations` of itself. */
export interface RecreationTarget {
  relational: boolean;
  /** The prefix of its relational tables' names. */
  prefix: string;
  documentTables: ReadonlyMap<string, TargetTable & SchemaTable>;
  /** Whether its cursors table exists, and (asked only then) whether it holds the sink's cursor. */
  cursorsExist: boolean;
  hasCursor(): Promise<boolean>;
}

/**
 * `recreations` at a target, if the target holds the sink's cursor (so the missing tables were
 * written before and dropped since, not never made); none otherwise.
 */
export async function targetRecreations(
  target: RecreationTarget,
  types: readonly string[],
  missing: readonly SchemaTable[],
): Promise<Recreation[]> {
  const found = recreations(types, target.documentTables, target.relational, target.prefix, missing);
  if (found.length === 0 || !target.cursorsExist) return [];
  return (await target.hasCursor()) ? found : [];
}

/**
 * Where a re-created type's table is re-filled from: the target's cursor (what its tables hold),
 * or the boundary of the snapshot the sink is delivering (what the snapshot makes of them, deletes
 * included); null when the target has no cursor of the sink.
 */
export function refillPosition(target: TargetCursor | null, snapshotTo: ChangePosition | null): ChangePosition | null {
  return snapshotTo ?? target?.cursor ?? null;
}

/** What the re-fill does to one target, in the transaction of the batch (MySQL: on tables not yet under their names). */
export interface RecreateWriter {
  /** Writes live changes of a type as a batch writes them (guarded by seq and by the tombstones). */
  write(recreation: Recreation, changes: Change[]): Promise<void>;
  /** Removes the rows of a table of `ownerIds` (every row when null). */
  clear(table: string, ownerIds: readonly string[] | null): Promise<void>;
  /** A page of the stored rows of a type's own table after `after`, in key order. */
  stored(spec: RelationalType, after: StoredRow | null): Promise<StoredRow[]>;
  /** Inserts child rows into a re-created child table. */
  insert(table: RelationalTable, rows: RelationalRow[]): Promise<void>;
  count(table: string): Promise<number>;
}

/**
 * Re-fills the re-created tables: a type's own table with every live resource of the type at `at`
 * (as a snapshot there gives them; its child tables cleared of the sink's owners first, so none keeps a
 * row of a resource no longer live), a child table alone from each stored row's `resource` of its type.
 */
export async function refillRecreated(
  writer: RecreateWriter,
  recreations: readonly Recreation[],
  live: LiveResources,
  at: ChangePosition | null,
  ownerIds: readonly string[] | null,
): Promise<Refill[]> {
  const refills: Refill[] = [];
  for (const recreation of recreations) {
    const { layout, missing } = recreation;
    const main = layout.kind === 'document' ? layout.table.name : layout.spec.table.name;
    let from: string;
    if (missing.some((table) => table.name === main)) {
      if (at === null) continue;
      if (layout.kind === 'relational')
        for (const child of layout.spec.children)
          if (!missing.some((table) => table.name === child.table.name)) await writer.clear(child.table.name, ownerIds);
      for await (const page of live.pages(recreation.type, at, ownerIds)) await writer.write(recreation, page);
      from = `the change log at ${encodeChangeCursor(at)}`;
    } else if (layout.kind === 'relational') {
      await refillChildren(writer, layout.spec, missing);
      from = `the resource of each ${main} row`;
    } else continue;
    for (const table of missing) refills.push({ table: table.name, rows: await writer.count(table.name), from });
  }
  return refills;
}

async function refillChildren(writer: RecreateWriter, spec: RelationalType, missing: readonly SchemaTable[]) {
  const children = spec.children.filter((child) => missing.some((table) => table.name === child.table.name));
  let after: StoredRow | null = null;
  for (;;) {
    const rows = await writer.stored(spec, after);
    if (rows.length === 0) return;
    const written = rows.map((row) => relationalRows(spec, storedChange(spec.type, row)).children);
    for (const child of children) {
      const childRows = written.flatMap((byTable) => byTable.get(child.table.name) ?? []);
      if (childRows.length > 0) await writer.insert(child.table, childRows);
    }
    after = rows[rows.length - 1];
  }
}

/** `spec` with the tables of `names` under other names (MySQL writes a re-created table under a staging name). */
export function renamedSpec(spec: RelationalType, name: (table: string) => string): RelationalType {
  return {
    ...spec,
    table: { ...spec.table, name: name(spec.table.name) },
    children: spec.children.map((child) => ({ ...child, table: { ...child.table, name: name(child.table.name) } })),
  };
}

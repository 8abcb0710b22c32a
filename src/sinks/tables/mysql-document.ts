import type { Change } from '../../changes/change.js';
import { allColumns, TableColumn, TargetTable, targetRow } from './table-columns.js';
import type { SchemaTable } from './table-schema.js';

/** Rows per INSERT, so a statement stays far below max_allowed_packet. */
const ROWS_PER_STATEMENT = 500;

/** Identifiers are checked against TABLE_PREFIX_PATTERN or come from the code; quoted all the same. */
export const quote = (name: string) => `\`${name.replace(/`/g, '``')}\``;
/** DATETIME(3) holds UTC without a zone: `2024-01-01 09:30:00.000`. */
const datetime = (iso: string) => new Date(iso).toISOString().replace('T', ' ').replace('Z', '');

/** Runs one statement of `writeMysqlTable` (on the connection of the batch's transaction). */
export type MysqlRun = (sql: string, values: unknown[]) => Promise<[unknown, unknown]>;

/**
 * A table's part of a batch: upserts whose row has a newer tombstone are left out; deletes
 * (newer than the row) write their tombstones; the upsert changes a row only when its seq is
 * newer (seq is assigned last, so every other assignment still sees the stored one).
 */
export async function writeMysqlTable(
  run: MysqlRun,
  table: TargetTable & SchemaTable,
  tombstones: string,
  changes: Change[],
): Promise<void> {
  const deletes = changes.filter((change) => change.op === 'delete');
  let upserts = changes.filter((change) => change.op === 'upsert');
  if (upserts.length > 0) {
    const [rows] = await run(
      `SELECT owner_id, id, seq FROM ${quote(tombstones)} WHERE type = ? AND (owner_id, id) IN (${upserts.map(() => '(?, ?)').join(', ')}) FOR UPDATE`,
      [table.type, ...upserts.flatMap((change) => [change.owner_id ?? '', change.id])],
    );
    const buried = new Map(
      (rows as Array<{ owner_id: string; id: string; seq: string }>).map((row) => [
        `${row.owner_id}\u0000${row.id}`,
        Number(row.seq),
      ]),
    );
    upserts = upserts.filter((change) => (buried.get(`${change.owner_id ?? ''}\u0000${change.id}`) ?? -1) < change.seq);
  }
  if (deletes.length > 0) {
    await run(
      `INSERT INTO ${quote(tombstones)} (type, owner_id, id, seq) VALUES ${deletes.map(() => '(?, ?, ?, ?)').join(', ')}
       ON DUPLICATE KEY UPDATE seq = GREATEST(COALESCE(seq, 0), VALUES(seq))`,
      deletes.flatMap((change) => [table.type, change.owner_id ?? '', change.id, change.seq]),
    );
    await run(
      `DELETE FROM ${quote(table.name)} WHERE ${deletes.map(() => '(owner_id = ? AND id = ? AND (seq IS NULL OR seq < ?))').join(' OR ')}`,
      deletes.flatMap((change) => [change.owner_id ?? '', change.id, change.seq]),
    );
  }
  const written = allColumns(table).filter((column) => column.name !== 'synced_at');
  const guard = `seq IS NULL OR seq < VALUES(seq)`;
  const updates = [...table.columns.map((column) => column.name), 'resource', 'version_occurred_at', 'synced_at', 'seq']
    .map((name) => `${quote(name)} = IF(${guard}, VALUES(${quote(name)}), ${quote(name)})`)
    .join(', ');
  const placeholders = `(${written.map(() => '?').join(', ')}, UTC_TIMESTAMP(3))`;
  for (let start = 0; start < upserts.length; start += ROWS_PER_STATEMENT) {
    const chunk = upserts.slice(start, start + ROWS_PER_STATEMENT);
    await run(
      `INSERT INTO ${quote(table.name)} (${written.map((column) => quote(column.name)).join(', ')}, synced_at)
       VALUES ${chunk.map(() => placeholders).join(', ')}
       ON DUPLICATE KEY UPDATE ${updates}`,
      chunk.flatMap((change) => mysqlValues(table, written, change)),
    );
  }
}

/** A change's values in `columns` order, as mysql2 sends them: JSON as text, timestamps as DATETIME text. */
function mysqlValues(table: TargetTable, columns: TableColumn[], change: Change): unknown[] {
  const row = targetRow(table, change);
  const all: Record<string, unknown> = {
    ...row.values,
    owner_id: row.owner_id,
    id: row.id,
    resource: row.resource,
    version_occurred_at: row.version_occurred_at,
    seq: row.seq,
  };
  return columns.map((column) => mysqlValue(column, all[column.name] ?? null));
}

/** A value as mysql2 sends it: JSON as text, timestamps as DATETIME text. */
export function mysqlValue(column: TableColumn, value: unknown): unknown {
  if (value === null) return null;
  if (column.kind === 'json') return JSON.stringify(value);
  if (column.kind === 'timestamp') return datetime(value as string);
  return value;
}

import type { Change } from '../../changes/change.js';
import { MYSQL_TYPES } from './column-types.js';
import type { MysqlRun } from './mysql-document.js';
import { batchRows, planRelational, RelationalPlan, RelationalRow, rowKey } from './relational-rows.js';
import type { RelationalColumn, RelationalTable, RelationalType } from './relational-tables.js';

/** Rows per statement, so one stays far below max_allowed_packet. */
const ROWS_PER_STATEMENT = 500;
/** The collation of text when the database's default is no UCA `_ci` one (MariaDB's is utf8mb4_general_ci). */
export const RELATIONAL_COLLATION = 'utf8mb4_unicode_ci';
const UCA_CI = /^utf8mb4_(unicode_ci|unicode_520_ci|0900_a[is]_ci|uca1400(_[a-z0-9]+)*_a[is]_ci)$/;

const quote = (name: string) => `\`${name.replace(/`/g, '``')}\``;
const datetime = (iso: string) => new Date(iso).toISOString().replace('T', ' ').replace('Z', '');

/** The collation of the relational layout's text: the database's default when it is a UCA `_ci` one. */
export const relationalCollation = (databaseDefault: string): string =>
  UCA_CI.test(databaseDefault) ? databaseDefault : RELATIONAL_COLLATION;

/** A column's type: keys and text ids exact (binary), other text case-insensitive in `collation`. */
export function mysqlRelationalType(table: RelationalTable, column: RelationalColumn, collation: string): string {
  const notNull = table.primaryKey.includes(column.name) ? ' NOT NULL' : '';
  if (column.kind !== 'text') return `${MYSQL_TYPES[column.kind]}${notNull}`;
  return column.exact === true
    ? `VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin${notNull}`
    : `LONGTEXT CHARACTER SET utf8mb4 COLLATE ${collation}${notNull}`;
}

const value = (column: RelationalColumn, row: RelationalRow): unknown => {
  const found = row[column.name] ?? null;
  if (found === null) return null;
  if (column.kind === 'json') return JSON.stringify(found);
  if (column.kind === 'timestamp') return datetime(found as string);
  return found;
};

/** `WHERE` of the rows keyed by `columns`' values in `rows` (`(a, b) IN ((?, ?), …)`), with its values. */
const keyed = (columns: readonly RelationalColumn[], rows: RelationalRow[]): [string, unknown[]] => [
  `(${columns.map((column) => quote(column.name)).join(', ')}) IN (${rows.map(() => `(${columns.map(() => '?').join(', ')})`).join(', ')})`,
  rows.flatMap((row) => columns.map((column) => value(column, row))),
];

function chunks<T>(items: T[]): T[][] {
  const out: T[][] = [];
  for (let start = 0; start < items.length; start += ROWS_PER_STATEMENT)
    out.push(items.slice(start, start + ROWS_PER_STATEMENT));
  return out;
}

/**
 * A table's part of a batch in the relational layout (docs/reference.md §12), in the batch's
 * transaction: the rows (locked) and tombstones of its changes read, deletes with their
 * tombstones, the rows and child rows of the winning upserts and deletes cleared, the upserts'
 * rows (guarded by seq all the same) and child rows written.
 */
export async function writeMysqlRelational(
  run: MysqlRun,
  spec: RelationalType,
  tombstones: string,
  changes: Change[],
): Promise<void> {
  const rows = batchRows(spec, changes);
  const plan = await planAgainstTarget(run, spec, tombstones, changes);
  for (const chunk of chunks(plan.deletes))
    await run(
      `INSERT INTO ${quote(tombstones)} (type, owner_id, id, seq) VALUES ${chunk.map(() => '(?, ?, ?, ?)').join(', ')}
       ON DUPLICATE KEY UPDATE seq = GREATEST(COALESCE(seq, 0), VALUES(seq))`,
      chunk.flatMap((change) => [spec.type, change.owner_id ?? '', change.id, change.seq]),
    );
  for (const chunk of chunks(plan.removals))
    await run(
      `DELETE FROM ${quote(spec.table.name)} WHERE ${chunk.map(() => '(owner_id = ? AND id = ? AND (seq IS NULL OR seq < ?))').join(' OR ')}`,
      chunk.flatMap((change) => [change.owner_id ?? '', change.id, change.seq]),
    );
  const replaced = [...plan.removals, ...plan.upserts];
  for (const child of spec.children) {
    const parent = child.table.columns.slice(0, 2);
    for (const chunk of chunks(replaced)) {
      const [where, values] = keyed(
        parent,
        chunk.map((change) => ({ owner_id: change.owner_id ?? '', [child.parent]: change.id })),
      );
      await run(`DELETE FROM ${quote(child.table.name)} WHERE ${where}`, values);
    }
  }
  const upserted = plan.upserts.map((change) => rows.get(change)!);
  await insertMysqlRelational(
    run,
    spec.table,
    upserted.map(({ row }) => row),
    true,
  );
  for (const child of spec.children) {
    const childRows = upserted.flatMap(({ children }) => children.get(child.table.name) ?? []);
    await insertMysqlRelational(run, child.table, childRows, false);
  }
}

/** The plan of a batch given the target: its rows' seqs (read locked), each chunk's tombstones after its rows. */
async function planAgainstTarget(
  run: MysqlRun,
  spec: RelationalType,
  tombstones: string,
  changes: Change[],
): Promise<RelationalPlan> {
  const key = spec.table.columns.slice(0, 2);
  const stored = new Map<string, number | null>();
  const buried = new Map<string, number>();
  for (const chunk of chunks(changes.map((change) => ({ owner_id: change.owner_id ?? '', id: change.id })))) {
    const [where, values] = keyed(key, chunk);
    const [found] = await run(
      `SELECT owner_id, id, seq FROM ${quote(spec.table.name)} WHERE ${where} FOR UPDATE`,
      values,
    );
    for (const row of found as Array<{ owner_id: string; id: string | number; seq: string | null }>)
      stored.set(rowKey(row.owner_id, String(row.id)), row.seq === null ? null : Number(row.seq));
    const [dead] = await run(
      `SELECT owner_id, id, seq FROM ${quote(tombstones)} WHERE type = ? AND (owner_id, id) IN (${chunk.map(() => '(?, ?)').join(', ')}) FOR UPDATE`,
      [spec.type, ...chunk.flatMap((row) => [row.owner_id, row.id])],
    );
    for (const row of dead as Array<{ owner_id: string; id: string; seq: string }>)
      buried.set(rowKey(row.owner_id, row.id), Number(row.seq));
  }
  return planRelational(changes, stored, buried);
}

/** Inserts `rows`; a type's own rows as upserts that change a row only when newer (seq assigned last). */
export async function insertMysqlRelational(
  run: MysqlRun,
  table: RelationalTable,
  rows: RelationalRow[],
  upsert: boolean,
): Promise<void> {
  const columns = table.columns.filter((column) => column.name !== 'synced_at');
  const names = columns.map((column) => quote(column.name)).join(', ');
  const guard = `seq IS NULL OR seq < VALUES(seq)`;
  const updates = [
    ...table.columns.filter((column) => !table.primaryKey.includes(column.name) && column.name !== 'seq'),
    { name: 'seq' },
  ]
    .map(
      ({ name }) =>
        `${quote(name)} = IF(${guard}, ${name === 'synced_at' ? 'UTC_TIMESTAMP(3)' : `VALUES(${quote(name)})`}, ${quote(name)})`,
    )
    .join(', ');
  const placeholders = `(${columns.map(() => '?').join(', ')}${upsert ? ', UTC_TIMESTAMP(3)' : ''})`;
  for (const chunk of chunks(rows))
    await run(
      `INSERT INTO ${quote(table.name)} (${names}${upsert ? ', synced_at' : ''}) VALUES ${chunk.map(() => placeholders).join(', ')}
       ${upsert ? `ON DUPLICATE KEY UPDATE ${updates}` : ''}`,
      chunk.flatMap((row) => columns.map((column) => value(column, row))),
    );
}

import type pg from 'pg';
import type { Change } from '../../changes/change.js';
import { PG_TYPES } from './column-types.js';
import { batchRows, planRelational, RelationalPlan, RelationalRow, rowKey } from './relational-rows.js';
import type { RelationalColumn, RelationalTable, RelationalType } from './relational-tables.js';

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** `$1` (a JSON array of rows) as a relation `r` of `columns`. */
const recordset = (columns: readonly RelationalColumn[]) =>
  `jsonb_to_recordset($1::jsonb) AS r(${columns.map((column) => `${quote(column.name)} ${PG_TYPES[column.kind]}`).join(', ')})`;

const matches = (alias: string, columns: readonly RelationalColumn[]) =>
  columns.map((column) => `${alias}.${quote(column.name)} = r.${quote(column.name)}`).join(' AND ');

const keyOf = (change: Change) => ({ owner_id: change.owner_id ?? '', id: change.id, seq: change.seq });

/**
 * A table's part of a batch in the relational layout (docs/reference.md §12), in the batch's
 * transaction: every id checked, the rows and tombstones of its changes read (the rows locked),
 * then deletes with their tombstones, the rows and child rows of the winning upserts and deletes
 * cleared, and the upserts' rows (guarded by seq all the same) and child rows written.
 */
export async function writePostgresRelational(
  client: pg.ClientBase,
  schema: string,
  tombstones: string,
  spec: RelationalType,
  changes: Change[],
): Promise<void> {
  const name = (table: string) => `${quote(schema)}.${quote(table)}`;
  const rows = batchRows(spec, changes);
  const plan = await planAgainstTarget(client, name, tombstones, spec, changes);
  if (plan.deletes.length > 0)
    await client.query(
      `INSERT INTO ${name(tombstones)} AS d (type, owner_id, id, seq)
       SELECT $2, owner_id, id, seq FROM jsonb_to_recordset($1::jsonb) AS r(owner_id text, id text, seq bigint)
       ON CONFLICT (type, owner_id, id) DO UPDATE SET seq = EXCLUDED.seq WHERE d.seq IS NULL OR d.seq < EXCLUDED.seq`,
      [JSON.stringify(plan.deletes.map(keyOf)), spec.type],
    );
  const key = spec.table.columns.slice(0, 2);
  if (plan.removals.length > 0)
    await client.query(
      `DELETE FROM ${name(spec.table.name)} t USING ${recordset([...key, { name: 'seq', kind: 'integer' }])}
        WHERE ${matches('t', key)} AND (t.seq IS NULL OR t.seq < r.seq)`,
      [JSON.stringify(plan.removals.map(keyOf))],
    );
  const replaced = [...plan.removals, ...plan.upserts];
  for (const child of replaced.length === 0 ? [] : spec.children) {
    const parent = child.table.columns.slice(0, 2);
    await client.query(
      `DELETE FROM ${name(child.table.name)} c USING ${recordset(parent)} WHERE ${matches('c', parent)}`,
      [JSON.stringify(replaced.map((change) => ({ owner_id: change.owner_id ?? '', [child.parent]: change.id })))],
    );
  }
  if (plan.upserts.length === 0) return;
  const upserted = plan.upserts.map((change) => rows.get(change)!);
  await insertRelational(
    client,
    name(spec.table.name),
    spec.table,
    upserted.map(({ row }) => row),
    true,
  );
  for (const child of spec.children) {
    const childRows = upserted.flatMap(({ children }) => children.get(child.table.name) ?? []);
    if (childRows.length > 0) await insertRelational(client, name(child.table.name), child.table, childRows, false);
  }
}

/** The plan of a batch given the target: its rows' seqs (read locked) and then their tombstones'. */
async function planAgainstTarget(
  client: pg.ClientBase,
  name: (table: string) => string,
  tombstones: string,
  spec: RelationalType,
  changes: Change[],
): Promise<RelationalPlan> {
  const key = spec.table.columns.slice(0, 2);
  const keys = JSON.stringify(changes.map(keyOf));
  const stored = await client.query<{ owner_id: string; id: string; seq: string | null }>(
    `SELECT t.owner_id, t.id::text AS id, t.seq FROM ${name(spec.table.name)} t JOIN ${recordset(key)} ON ${matches('t', key)}
     FOR UPDATE OF t`,
    [keys],
  );
  // After the rows' locks: a delete that held one has written its tombstone by now.
  const buried = await client.query<{ owner_id: string; id: string; seq: string }>(
    `SELECT d.owner_id, d.id, d.seq FROM ${name(tombstones)} d JOIN jsonb_to_recordset($1::jsonb) AS r(owner_id text, id text)
       ON d.owner_id = r.owner_id AND d.id = r.id WHERE d.type = $2`,
    [keys, spec.type],
  );
  return planRelational(
    changes,
    new Map(stored.rows.map((row) => [rowKey(row.owner_id, row.id), row.seq === null ? null : Number(row.seq)])),
    new Map(buried.rows.map((row) => [rowKey(row.owner_id, row.id), Number(row.seq)])),
  );
}

/** Inserts `rows` (a type's own table: upserts, each only over an older row; synced_at the target's clock). */
export async function insertRelational(
  client: pg.ClientBase,
  qualified: string,
  table: RelationalTable,
  rows: RelationalRow[],
  upsert: boolean,
): Promise<void> {
  const columns = table.columns.filter((column) => column.name !== 'synced_at');
  const names = columns.map((column) => quote(column.name));
  const updates = table.columns
    .filter((column) => !table.primaryKey.includes(column.name))
    .map((column) => `${quote(column.name)} = EXCLUDED.${quote(column.name)}`)
    .join(', ');
  const conflict = upsert
    ? `ON CONFLICT (${table.primaryKey.map(quote).join(', ')}) DO UPDATE SET ${updates} WHERE t.seq IS NULL OR t.seq < EXCLUDED.seq`
    : '';
  await client.query(
    `INSERT INTO ${qualified} AS t (${names.join(', ')}${upsert ? ', synced_at' : ''})
     SELECT ${names.map((column) => `r.${column}`).join(', ')}${upsert ? ', now()' : ''} FROM ${recordset(columns)} ${conflict}`,
    [JSON.stringify(rows)],
  );
}

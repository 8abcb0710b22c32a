import pg from 'pg';
import type { Change } from '../../changes/change.js';
import {
  changesByType,
  countRows,
  decodeTargetCursor,
  encodeTargetCursor,
  planBatch,
  RowCounts,
  TargetCursor,
} from './table-batch.js';
import type { ApplyResult, TableBatch, TableClient, TableClientOptions } from './table-client.js';
import { guardedSocket } from './guarded-socket.js';
import { postgresTargetSsl } from './table-tls.js';
import { PG_TYPES } from './column-types.js';
import { allColumns, TableColumn, TargetTable, targetRow } from './table-columns.js';
import { CURSORS_TABLE, SchemaTable, schemaColumns, schemaWork, sinkTables } from './table-schema.js';
import { insertRelational, writePostgresRelational } from './postgres-relational.js';
import { relationalTables, relationalType } from './relational-tables.js';
import { addedByTable, MissingPlan, planMissing, Refill, REFILL_PAGE, StoredRow } from './table-refill.js';
import {
  Recreation,
  RecreationTarget,
  RecreateWriter,
  refillPosition,
  refillRecreated,
  targetRecreations,
} from './table-recreate.js';

/** undefined_table, invalid_schema_name: a target the sink has not written yet. */
const UNDEFINED_RELATION = new Set(['42P01', '3F000']);

/** Identifiers are checked against SCHEMA_PATTERN or come from the code; quoted all the same. */
const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

const qualified = (schema: string, table: string) => `${quote(schema)}.${quote(table)}`;

/** The input row of a change for `postgresWriteStatement`: typed values by column name, absent ones left out (NULL). */
export function postgresInputRow(table: TargetTable, change: Change): Record<string, unknown> {
  const row = targetRow(table, change);
  const values = Object.fromEntries(Object.entries(row.values).filter(([, value]) => value !== null));
  return {
    ...values,
    op: change.op,
    owner_id: row.owner_id,
    id: row.id,
    resource: row.resource,
    version_occurred_at: row.version_occurred_at,
    seq: row.seq,
  };
}

/**
 * A table's part of a batch in one statement, `$1` the JSON array of `postgresInputRow`s and `$2`
 * the type: deletes (newer than the row) with their tombstones, and upserts newer than both the row
 * and its tombstone, so a replayed or resent change never moves a row back, nor brings a deleted one back.
 */
export function postgresWriteStatement(schema: string, table: TargetTable & SchemaTable, tombstones: string): string {
  const written = allColumns(table).filter((column) => column.name !== 'synced_at');
  const input = [{ name: 'op', kind: 'text' } as TableColumn, ...written]
    .map((column) => `${quote(column.name)} ${PG_TYPES[column.kind]}`)
    .join(', ');
  const names = written.map((column) => quote(column.name));
  const updates = [...table.columns.map((column) => column.name), 'resource', 'version_occurred_at', 'seq', 'synced_at']
    .map((name) => `${quote(name)} = EXCLUDED.${quote(name)}`)
    .join(', ');
  const t = qualified(schema, table.name);
  const d = qualified(schema, tombstones);
  return `WITH input AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(${input})),
     tombstoned AS (
       INSERT INTO ${d} AS d (type, owner_id, id, seq) SELECT $2, owner_id, id, seq FROM input WHERE op = 'delete'
       ON CONFLICT (type, owner_id, id) DO UPDATE SET seq = EXCLUDED.seq WHERE d.seq IS NULL OR d.seq < EXCLUDED.seq
       RETURNING 1),
     deleted AS (
       DELETE FROM ${t} t USING input i
        WHERE i.op = 'delete' AND t.owner_id = i.owner_id AND t.id = i.id AND (t.seq IS NULL OR t.seq < i.seq)
       RETURNING 1)
   INSERT INTO ${t} AS t (${names.join(', ')}, synced_at)
   SELECT ${names.map((name) => `i.${name}`).join(', ')}, now() FROM input i
    WHERE i.op = 'upsert'
      AND NOT EXISTS (SELECT 1 FROM ${d} d WHERE d.type = $2 AND d.owner_id = i.owner_id AND d.id = i.id AND d.seq > i.seq)
   ON CONFLICT (owner_id, id) DO UPDATE SET ${updates}
    WHERE t.seq IS NULL OR t.seq < EXCLUDED.seq`;
}

export interface PostgresTableOptions extends TableClientOptions {
  schema: string;
}

/**
 * A PostgreSQL target: a pool of two connections, the sink's tables in `schema`. A batch is one
 * transaction: the cursor row locked, one statement per table (deletes, their tombstones and the
 * upserts, each guarded by seq), the cursor moved.
 */
export class PostgresTableClient implements TableClient {
  readonly database = 'PostgreSQL';
  private readonly pool: pg.Pool;
  private readonly schema: string;
  private readonly relational: boolean;
  /** The types whose tables were checked (and created or extended) by this client. */
  private readonly ensured = new Set<string>();

  constructor(options: PostgresTableOptions) {
    const { target } = options;
    this.schema = options.schema;
    this.relational = options.layout === 'relational';
    this.pool = new pg.Pool({
      host: target.host,
      port: target.port,
      stream: () => guardedSocket(options.resolve, target.port),
      user: target.user,
      password: target.password ?? undefined,
      database: target.database,
      ssl: postgresTargetSsl(target),
      max: 2,
      idleTimeoutMillis: 30_000,
      connectionTimeoutMillis: options.timeoutMs,
      statement_timeout: options.timeoutMs,
      lock_timeout: options.timeoutMs,
      application_name: 'menu-sync',
    });
    // An idle connection that dies is dropped by the pool; the next batch finds out for itself.
    this.pool.on('error', () => undefined);
  }

  async apply(batch: TableBatch): Promise<ApplyResult> {
    const tables = sinkTables(batch.types, '');
    const { refills, recreate } = await this.ensure(batch, tables);
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ cursor: string; epoch: string }>(
        `SELECT "cursor", epoch FROM ${this.name(tables.cursors.name)} WHERE sink_id = $1 FOR UPDATE`,
        [batch.sinkId],
      );
      const target =
        rows.length === 0 ? null : { cursor: decodeTargetCursor(rows[0].cursor), epoch: Number(rows[0].epoch) };
      const plan = planBatch(target, batch.epoch, batch.expected, batch.entries);
      if (plan.kind === 'behind') {
        await client.query('ROLLBACK');
        return plan;
      }
      if (recreate.length > 0)
        refills.push(...(await this.recreate(client, batch, target, recreate, tables.tombstones.name)));
      if (plan.kind === 'applied') {
        await client.query(recreate.length > 0 ? 'COMMIT' : 'ROLLBACK');
        return { kind: 'already', refills };
      }
      const written: RowCounts = { upserts: 0, deletes: 0 };
      for (const [type, changes] of changesByType(plan.entries)) {
        const table = tables.tables.get(type);
        if (table === undefined) continue;
        if (this.relational)
          await writePostgresRelational(client, this.schema, tables.tombstones.name, relationalType(type, ''), changes);
        else
          await client.query(postgresWriteStatement(this.schema, table, tables.tombstones.name), [
            JSON.stringify(changes.map((change) => postgresInputRow(table, change))),
            type,
          ]);
        countRows(written, changes);
      }
      await client.query(
        `INSERT INTO ${this.name(tables.cursors.name)} (sink_id, "cursor", epoch, updated_at) VALUES ($1, $2, $3, now())
         ON CONFLICT (sink_id) DO UPDATE SET "cursor" = EXCLUDED."cursor", epoch = EXCLUDED.epoch, updated_at = now()`,
        [batch.sinkId, encodeTargetCursor(batch.entries[batch.entries.length - 1].position), batch.epoch],
      );
      await client.query('COMMIT');
      return { kind: 'applied', rows: written, refills };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  /** The target's cursor of the sink; null before its first batch (no row, or no table yet). */
  async targetCursor(sinkId: string): Promise<TargetCursor | null> {
    try {
      const { rows } = await this.pool.query<{ cursor: string; epoch: string }>(
        `SELECT "cursor", epoch FROM ${this.name(CURSORS_TABLE)} WHERE sink_id = $1`,
        [sinkId],
      );
      return rows.length === 0 ? null : { cursor: decodeTargetCursor(rows[0].cursor), epoch: Number(rows[0].epoch) };
    } catch (error) {
      if (UNDEFINED_RELATION.has((error as { code?: string })?.code ?? '')) return null;
      throw error;
    }
  }

  close(): Promise<void> {
    return this.pool.end();
  }

  private name(table: string): string {
    return qualified(this.schema, table);
  }

  /**
   * Creates what the target lacks (the schema, the tables of types not seen yet, columns dropped or
   * not there yet), once per client: a client is discarded after a failure, so the next one looks again.
   * The tables the sink wrote before (the target holds its cursor) are left to `recreate`, in the
   * batch's transaction: should it fail, the next client finds them missing again.
   */
  private async ensure(
    batch: TableBatch,
    tables: ReturnType<typeof sinkTables>,
  ): Promise<{ refills: Refill[]; recreate: Recreation[] }> {
    const { types } = batch;
    const missing = types.filter((type) => !this.ensured.has(type));
    if (missing.length === 0 && this.ensured.size > 0) return { refills: [], recreate: [] };
    const refills: Refill[] = [];
    const typeTables = this.relational
      ? relationalTables(missing, '')
      : missing.map((type) => tables.tables.get(type)!);
    const wanted = [tables.cursors, tables.tombstones, ...typeTables];
    const { schemaExists, existing } = await this.existingColumns();
    const work = schemaWork(existing, wanted);
    const recreate = await this.recreations(batch.sinkId, missing, tables, work.create, existing);
    const deferred = new Set(recreate.flatMap((recreation) => recreation.missing.map((table) => table.name)));
    const create = work.create.filter(({ table }) => !deferred.has(table.name));
    if (!schemaExists || create.length > 0 || work.add.length > 0) {
      const client = await this.pool.connect();
      try {
        await client.query('BEGIN');
        // Two sinks creating the same schema at once would fail one another's CREATE.
        await client.query(`SELECT pg_advisory_xact_lock(hashtext('menu_sync_table_sinks'))`);
        if (!schemaExists) await client.query(`CREATE SCHEMA IF NOT EXISTS ${quote(this.schema)}`);
        for (const { table } of create) await client.query(this.createStatement(table));
        for (const [name, columns] of addedByTable(work.add)) {
          const table = wanted.find((candidate) => candidate.name === name)!;
          const plan = await this.missingColumns(client, table, columns, types);
          for (const column of plan.add)
            await client.query(
              `ALTER TABLE ${this.name(name)} ADD COLUMN IF NOT EXISTS ${quote(column.name)} ${PG_TYPES[column.kind]}`,
            );
          if (plan.refill.length > 0)
            refills.push({
              table: name,
              columns: plan.refill.map((column) => column.name),
              rows: await refillPostgres(client, this.name(name), table, plan),
            });
        }
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
    }
    for (const type of types) this.ensured.add(type);
    return { refills, recreate };
  }

  private createStatement(table: SchemaTable): string {
    const definitions = schemaColumns(table).map((column) => `${quote(column.name)} ${PG_TYPES[column.kind]}`);
    return `CREATE TABLE IF NOT EXISTS ${this.name(table.name)} (${definitions.join(', ')}, PRIMARY KEY (${table.primaryKey.map(quote).join(', ')}))`;
  }

  /** The types of `missing` whose tables among `create` the sink wrote before: the target holds its cursor. */
  private recreations(
    sinkId: string,
    missing: readonly string[],
    tables: ReturnType<typeof sinkTables>,
    create: ReadonlyArray<{ table: SchemaTable }>,
    existing: ReadonlyMap<string, ReadonlySet<string>>,
  ): Promise<Recreation[]> {
    const target: RecreationTarget = {
      relational: this.relational,
      prefix: '',
      documentTables: tables.tables,
      cursorsExist: existing.has(CURSORS_TABLE),
      hasCursor: async () =>
        (await this.pool.query(`SELECT 1 FROM ${this.name(CURSORS_TABLE)} WHERE sink_id = $1`, [sinkId])).rows.length >
        0,
    };
    return targetRecreations(
      target,
      missing,
      create.map(({ table }) => table),
    );
  }

  /**
   * Re-creates the tables of `recreate` and re-fills them (`refillRecreated`) in the batch's
   * transaction, before its changes, at the target's cursor (or the snapshot's boundary).
   */
  private async recreate(
    client: pg.PoolClient,
    batch: TableBatch,
    target: TargetCursor | null,
    recreate: readonly Recreation[],
    tombstones: string,
  ): Promise<Refill[]> {
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('menu_sync_table_sinks'))`);
    for (const { missing } of recreate) for (const table of missing) await client.query(this.createStatement(table));
    const writer: RecreateWriter = {
      write: async ({ type, layout }, changes) => {
        if (layout.kind === 'relational')
          return writePostgresRelational(client, this.schema, tombstones, layout.spec, changes);
        await client.query(postgresWriteStatement(this.schema, layout.table, tombstones), [
          JSON.stringify(changes.map((change) => postgresInputRow(layout.table, change))),
          type,
        ]);
      },
      clear: async (table, ownerIds) => {
        await client.query(`DELETE FROM ${this.name(table)} WHERE $1::text[] IS NULL OR owner_id = ANY($1::text[])`, [
          ownerIds === null ? null : [...ownerIds],
        ]);
      },
      stored: (spec, after) => storedPage(client, this.name(spec.table.name), spec.table.columns[1].kind, after),
      insert: (table, rows) => insertRelational(client, this.name(table.name), table, rows, false),
      count: async (table) =>
        (await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${this.name(table)}`)).rows[0].n,
    };
    return refillRecreated(writer, recreate, batch.live, refillPosition(target, batch.snapshotTo), batch.ownerIds);
  }

  /** What to add of a table's missing columns (`planMissing`), looking whether it has rows. */
  private async missingColumns(
    client: pg.PoolClient,
    table: SchemaTable,
    columns: TableColumn[],
    types: readonly string[],
  ) {
    const { rows } = await client.query<{ found: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM ${this.name(table.name)}) AS found`,
    );
    const specs = this.relational ? types.map((type) => relationalType(type, '')) : [];
    return planMissing(table, columns, rows[0].found, specs);
  }

  /** The schema's tables and their columns (read from the catalogue: a role sees them whatever its privileges). */
  private async existingColumns(): Promise<{ schemaExists: boolean; existing: Map<string, Set<string>> }> {
    const namespace = await this.pool.query(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [this.schema]);
    const { rows } = await this.pool.query<{ table_name: string; column_name: string }>(
      `SELECT c.relname AS table_name, a.attname AS column_name
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')`,
      [this.schema],
    );
    const existing = new Map<string, Set<string>>();
    for (const row of rows)
      existing.set(row.table_name, (existing.get(row.table_name) ?? new Set()).add(row.column_name));
    return { schemaExists: namespace.rows.length > 0, existing };
  }
}

/**
 * Re-fills the plan's columns of every row of a type's table from its `resource`, in pages by key,
 * in the transaction that added them: the rows end as a batch would have written them. Returns the rows.
 */
async function refillPostgres(
  client: pg.PoolClient,
  qualifiedName: string,
  table: SchemaTable,
  plan: MissingPlan,
): Promise<number> {
  const values = plan.refill.filter((column) => column.name !== 'synced_at');
  const columns = schemaColumns(table);
  const key = ['owner_id', 'id'].map((name) => columns.find((column) => column.name === name)!);
  const record = [...key, ...values].map((column) => `${quote(column.name)} ${PG_TYPES[column.kind]}`);
  const assignments = [
    ...values.map((column) => `${quote(column.name)} = r.${quote(column.name)}`),
    ...(values.length < plan.refill.length ? ['"synced_at" = now()'] : []),
  ];
  let after = null as StoredRow | null;
  let count = 0;
  for (;;) {
    const rows = await storedPage(client, qualifiedName, key[1].kind, after);
    if (rows.length === 0) return count;
    const input = rows.map((row) => {
      const filled = plan.values(row);
      return Object.fromEntries([
        ['owner_id', row.owner_id],
        ['id', row.id],
        ...values.map((column) => [column.name, filled[column.name] ?? null]),
      ]);
    });
    await client.query(
      `UPDATE ${qualifiedName} t SET ${assignments.join(', ')}
         FROM jsonb_to_recordset($1::jsonb) AS r(${record.join(', ')})
        WHERE t.owner_id = r.owner_id AND t.id = r.id`,
      [JSON.stringify(input)],
    );
    count += rows.length;
    after = rows[rows.length - 1];
  }
}

/** A page of a table's stored rows after `after`, in key order (`idKind`: how its `id` is typed). */
async function storedPage(
  client: pg.PoolClient,
  qualifiedName: string,
  idKind: TableColumn['kind'],
  after: StoredRow | null,
): Promise<StoredRow[]> {
  const { rows } = await client.query<StoredRow>(
    `SELECT owner_id, id::text AS id, resource FROM ${qualifiedName}
      WHERE $1::text IS NULL OR (owner_id, id) > ($1, $2::${PG_TYPES[idKind]}) ORDER BY owner_id, id LIMIT ${REFILL_PAGE}`,
    [after?.owner_id ?? null, after?.id ?? null],
  );
  return rows;
}

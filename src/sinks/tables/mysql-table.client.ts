import mysql from 'mysql2/promise';
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
import { mysqlTargetSsl } from './table-tls.js';
import { MYSQL_TYPES } from './column-types.js';
import { allColumns, TableColumn, TargetTable, targetRow } from './table-columns.js';
import { CURSORS_TABLE, SchemaTable, schemaWork, sinkTables } from './table-schema.js';
import { mysqlRelationalType, relationalCollation, writeMysqlRelational } from './mysql-relational.js';
import { RelationalTable, relationalTables, relationalType } from './relational-tables.js';
import { addedByTable, MissingPlan, planMissing, Refill, REFILL_PAGE, StoredRow } from './table-refill.js';

/** Primary-key columns need a length; binary collation, so ids differing only in case stay two rows. */
const KEY_TYPE = 'VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin';
/** ER_NO_SUCH_TABLE: a target the sink has not written yet. */
const NO_SUCH_TABLE = 'ER_NO_SUCH_TABLE';
/** Rows per INSERT, so a statement stays far below max_allowed_packet. */
const ROWS_PER_STATEMENT = 500;

/** Identifiers are checked against TABLE_PREFIX_PATTERN or come from the code; quoted all the same. */
const quote = (name: string) => `\`${name.replace(/`/g, '``')}\``;
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
function mysqlValue(column: TableColumn, value: unknown): unknown {
  if (value === null) return null;
  if (column.kind === 'json') return JSON.stringify(value);
  if (column.kind === 'timestamp') return datetime(value as string);
  return value;
}

export interface MysqlTableOptions extends TableClientOptions {
  tablePrefix: string;
}

/**
 * A MySQL 8 or MariaDB target, through mysql2 (it speaks both servers' protocols, MySQL 8's
 * caching_sha2_password included). A pool of two connections; the tables are `<prefix><type>` in
 * the URL's database. A batch is one transaction: the cursor row locked, per table the tombstones
 * of its rows read, deletes with their tombstones, one multi-row upsert guarded by seq, the cursor moved.
 */
export class MysqlTableClient implements TableClient {
  readonly database = 'MySQL';
  private readonly pool: mysql.Pool;
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly relational: boolean;
  private readonly ensured = new Set<string>();

  constructor(options: MysqlTableOptions) {
    const { target } = options;
    this.prefix = options.tablePrefix;
    this.timeoutMs = options.timeoutMs;
    this.relational = options.layout === 'relational';
    this.pool = mysql.createPool({
      // The socket goes to the checked address; `host` names the server for TLS only.
      host: target.host,
      port: target.port,
      stream: () => guardedSocket(options.resolve, target.port),
      user: target.user,
      password: target.password ?? undefined,
      database: target.database,
      ssl: mysqlTargetSsl(target),
      connectionLimit: 2,
      maxIdle: 2,
      idleTimeout: 30_000,
      connectTimeout: options.timeoutMs,
      charset: 'utf8mb4',
      timezone: 'Z',
      dateStrings: true,
      supportBigNumbers: true,
      bigNumberStrings: true,
    });
  }

  async apply(batch: TableBatch): Promise<ApplyResult> {
    const tables = sinkTables(batch.types, this.prefix);
    const refills = await this.ensure(batch.types, tables);
    const connection = await this.pool.getConnection();
    try {
      await this.query(connection, `SET SESSION innodb_lock_wait_timeout = ?`, [
        Math.max(1, Math.ceil(this.timeoutMs / 1000)),
      ]);
      await connection.beginTransaction();
      const [rows] = await this.query(
        connection,
        `SELECT \`cursor\`, epoch FROM ${quote(CURSORS_TABLE)} WHERE sink_id = ? FOR UPDATE`,
        [batch.sinkId],
      );
      const found = rows as Array<{ cursor: string; epoch: string }>;
      const target =
        found.length === 0 ? null : { cursor: decodeTargetCursor(found[0].cursor), epoch: Number(found[0].epoch) };
      const plan = planBatch(target, batch.epoch, batch.expected, batch.entries);
      if (plan.kind !== 'apply') {
        await connection.rollback();
        return plan.kind === 'applied' ? { kind: 'already' } : plan;
      }
      const written: RowCounts = { upserts: 0, deletes: 0 };
      for (const [type, changes] of changesByType(plan.entries)) {
        const table = tables.tables.get(type);
        if (table === undefined) continue;
        if (this.relational)
          await writeMysqlRelational(
            (sql, values) => this.query(connection, sql, values),
            relationalType(type, this.prefix),
            tables.tombstones.name,
            changes,
          );
        else
          await writeMysqlTable(
            (sql, values) => this.query(connection, sql, values),
            table,
            tables.tombstones.name,
            changes,
          );
        countRows(written, changes);
      }
      await this.query(
        connection,
        `INSERT INTO ${quote(CURSORS_TABLE)} (sink_id, \`cursor\`, epoch, updated_at) VALUES (?, ?, ?, UTC_TIMESTAMP(3))
         ON DUPLICATE KEY UPDATE \`cursor\` = VALUES(\`cursor\`), epoch = VALUES(epoch), updated_at = VALUES(updated_at)`,
        [batch.sinkId, encodeTargetCursor(batch.entries[batch.entries.length - 1].position), batch.epoch],
      );
      await connection.commit();
      return { kind: 'applied', rows: written, refills };
    } catch (error) {
      await connection.rollback().catch(() => undefined);
      throw error;
    } finally {
      connection.release();
    }
  }

  async targetCursor(sinkId: string): Promise<TargetCursor | null> {
    try {
      const [rows] = await this.pool.query({
        sql: `SELECT \`cursor\`, epoch FROM ${quote(CURSORS_TABLE)} WHERE sink_id = ?`,
        values: [sinkId],
        timeout: this.timeoutMs,
      });
      const found = rows as Array<{ cursor: string; epoch: string }>;
      return found.length === 0 ? null : { cursor: decodeTargetCursor(found[0].cursor), epoch: Number(found[0].epoch) };
    } catch (error) {
      if ((error as { code?: string })?.code === NO_SUCH_TABLE) return null;
      throw error;
    }
  }

  close(): Promise<void> {
    return this.pool.end();
  }

  private query(connection: mysql.PoolConnection, sql: string, values: unknown[] = []) {
    return connection.query({ sql, values, timeout: this.timeoutMs });
  }

  /** Creates what the target lacks, once per client (MySQL 8 has no ADD COLUMN IF NOT EXISTS: the catalogue is read first). */
  private async ensure(types: readonly string[], tables: ReturnType<typeof sinkTables>): Promise<Refill[]> {
    const missing = types.filter((type) => !this.ensured.has(type));
    if (missing.length === 0 && this.ensured.size > 0) return [];
    const typeTables = this.relational
      ? relationalTables(missing, this.prefix)
      : missing.map((type) => tables.tables.get(type)!);
    const wanted = [tables.cursors, tables.tombstones, ...typeTables];
    const [rows] = await this.pool.query({
      sql: `SELECT TABLE_NAME AS table_name, COLUMN_NAME AS column_name FROM information_schema.COLUMNS
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (${wanted.map(() => '?').join(', ')})`,
      values: wanted.map((table) => table.name),
      timeout: this.timeoutMs,
    });
    const existing = new Map<string, Set<string>>();
    for (const row of rows as Array<{ table_name: string; column_name: string }>)
      existing.set(row.table_name, (existing.get(row.table_name) ?? new Set()).add(row.column_name));
    const work = schemaWork(existing, wanted);
    const collation = this.relational ? await this.textCollation() : '';
    const type = (table: SchemaTable, column: TableColumn) =>
      'layout' in table
        ? mysqlRelationalType(table as RelationalTable, column, collation)
        : table.primaryKey.includes(column.name)
          ? `${KEY_TYPE} NOT NULL`
          : MYSQL_TYPES[column.kind];
    for (const { table, columns } of work.create) {
      const definitions = columns.map((column) => `${quote(column.name)} ${type(table, column)}`);
      await this.pool.query(
        `CREATE TABLE IF NOT EXISTS ${quote(table.name)} (${definitions.join(', ')}, PRIMARY KEY (${table.primaryKey.map(quote).join(', ')}))
         ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${'layout' in table ? collation : 'utf8mb4_bin'}`,
      );
    }
    const refills: Refill[] = [];
    for (const [name, columns] of addedByTable(work.add)) {
      const schemaTable = wanted.find((candidate) => candidate.name === name)!;
      const [found] = await this.pool.query({
        sql: `SELECT EXISTS (SELECT 1 FROM ${quote(name)}) AS found`,
        timeout: this.timeoutMs,
      });
      const specs = this.relational ? types.map((type) => relationalType(type, this.prefix)) : [];
      const hasRows = Number((found as Array<{ found: unknown }>)[0].found) === 1;
      const plan = planMissing(schemaTable, columns, hasRows, specs);
      for (const column of plan.add)
        await this.pool.query(
          `ALTER TABLE ${quote(name)} ADD COLUMN ${quote(column.name)} ${type(schemaTable, column)}`,
        );
      if (plan.refill.length > 0)
        refills.push({
          table: name,
          columns: plan.refill.map((column) => column.name),
          rows: await this.refill(schemaTable, plan),
        });
    }
    for (const name of types) this.ensured.add(name);
    return refills;
  }

  /**
   * Re-fills `columns` of every row of a document table from its `resource`, in pages by key. The
   * ALTER before it commits on its own (MySQL's DDL): a crash between them leaves the column empty
   * until `menu-sync sinks verify --repair` or a replay.
   */
  private async refill(table: SchemaTable, plan: MissingPlan): Promise<number> {
    const values = plan.refill.filter((column) => column.name !== 'synced_at');
    const names = ['owner_id', 'id', ...values.map((column) => column.name)];
    const updates = [
      ...values.map((column) => `${quote(column.name)} = VALUES(${quote(column.name)})`),
      ...(values.length < plan.refill.length ? ['`synced_at` = UTC_TIMESTAMP(3)'] : []),
    ];
    let after = null as StoredRow | null;
    let count = 0;
    for (;;) {
      const [rows]: [unknown, unknown] = await this.pool.query({
        sql: `SELECT owner_id, id, resource FROM ${quote(table.name)}
               WHERE ? IS NULL OR (owner_id, id) > (?, ?) ORDER BY owner_id, id LIMIT ${REFILL_PAGE}`,
        values: [after?.owner_id ?? null, after?.owner_id ?? null, after?.id ?? null],
        timeout: this.timeoutMs,
      });
      const stored: StoredRow[] = (rows as Array<{ owner_id: string; id: string; resource: unknown }>).map((row) => ({
        owner_id: row.owner_id,
        id: row.id,
        resource: (typeof row.resource === 'string' ? JSON.parse(row.resource) : row.resource) as StoredRow['resource'],
      }));
      if (stored.length === 0) return count;
      await this.pool.query({
        sql: `INSERT INTO ${quote(table.name)} (${names.map(quote).join(', ')})
              VALUES ${stored.map(() => `(${names.map(() => '?').join(', ')})`).join(', ')}
              ON DUPLICATE KEY UPDATE ${updates.join(', ')}`,
        values: stored.flatMap((row) => [
          row.owner_id,
          row.id,
          ...((filled) => values.map((column) => mysqlValue(column, filled[column.name] ?? null)))(plan.values(row)),
        ]),
        timeout: this.timeoutMs,
      });
      count += stored.length;
      after = stored[stored.length - 1];
    }
  }

  /** The relational layout's text collation: the database's default when it is a UCA `_ci` one. */
  private async textCollation(): Promise<string> {
    const [rows] = await this.pool.query({ sql: `SELECT @@collation_database AS collation`, timeout: this.timeoutMs });
    return relationalCollation(String((rows as Array<{ collation: unknown }>)[0].collation));
  }
}

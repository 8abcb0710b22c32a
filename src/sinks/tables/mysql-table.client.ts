import { createHash } from 'node:crypto';
import mysql from 'mysql2/promise';
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
import type { TableColumn } from './table-columns.js';
import { MysqlRun, mysqlValue, quote, writeMysqlTable } from './mysql-document.js';
import { CURSORS_TABLE, SchemaTable, schemaWork, sinkTables } from './table-schema.js';
import {
  insertMysqlRelational,
  mysqlRelationalType,
  relationalCollation,
  writeMysqlRelational,
} from './mysql-relational.js';
import { RelationalTable, relationalTables, relationalType } from './relational-tables.js';
import { addedByTable, MissingPlan, planMissing, Refill, REFILL_PAGE, StoredRow } from './table-refill.js';
import {
  Recreation,
  RecreationTarget,
  RecreateWriter,
  refillPosition,
  refillRecreated,
  renamedSpec,
  targetRecreations,
} from './table-recreate.js';

/** Primary-key columns need a length; binary collation, so ids differing only in case stay two rows. */
const KEY_TYPE = 'VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin';
/** ER_NO_SUCH_TABLE: a target the sink has not written yet. */
const NO_SUCH_TABLE = 'ER_NO_SUCH_TABLE';

export { writeMysqlTable };
export type { MysqlRun };

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
    const { refills, recreate, staged } = await this.ensure(batch, tables);
    const stage = (name: string) => staged.get(name) ?? name;
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
      if (plan.kind === 'behind') {
        await connection.rollback();
        return plan;
      }
      const run: MysqlRun = (sql, values) => this.query(connection, sql, values);
      if (recreate.length > 0)
        refills.push(...(await this.recreate(run, batch, target, recreate, tables.tombstones.name, stage)));
      if (plan.kind === 'applied') {
        await (recreate.length > 0 ? connection.commit() : connection.rollback());
        await this.unstage(staged);
        return { kind: 'already', refills };
      }
      const written: RowCounts = { upserts: 0, deletes: 0 };
      for (const [type, changes] of changesByType(plan.entries)) {
        const table = tables.tables.get(type);
        if (table === undefined) continue;
        if (this.relational)
          await writeMysqlRelational(
            run,
            renamedSpec(relationalType(type, this.prefix), stage),
            tables.tombstones.name,
            changes,
          );
        else await writeMysqlTable(run, { ...table, name: stage(table.name) }, tables.tombstones.name, changes);
        countRows(written, changes);
      }
      await this.query(
        connection,
        `INSERT INTO ${quote(CURSORS_TABLE)} (sink_id, \`cursor\`, epoch, updated_at) VALUES (?, ?, ?, UTC_TIMESTAMP(3))
         ON DUPLICATE KEY UPDATE \`cursor\` = VALUES(\`cursor\`), epoch = VALUES(epoch), updated_at = VALUES(updated_at)`,
        [batch.sinkId, encodeTargetCursor(batch.entries[batch.entries.length - 1].position), batch.epoch],
      );
      await connection.commit();
      await this.unstage(staged);
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

  /**
   * Creates what the target lacks, once per client (MySQL 8 has no ADD COLUMN IF NOT EXISTS: the
   * catalogue is read first). A table the sink wrote before (the target holds its cursor) is made
   * under a staging name, re-filled with the batch and renamed after it commits: MySQL's DDL commits
   * on its own, and until the rename the next client finds the table missing again.
   */
  private async ensure(
    batch: TableBatch,
    tables: ReturnType<typeof sinkTables>,
  ): Promise<{ refills: Refill[]; recreate: Recreation[]; staged: Map<string, string> }> {
    const { types } = batch;
    const missing = types.filter((type) => !this.ensured.has(type));
    if (missing.length === 0 && this.ensured.size > 0) return { refills: [], recreate: [], staged: new Map() };
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
    const recreate = await this.recreations(batch.sinkId, missing, tables, work.create, existing);
    const staged = new Map(
      recreate.flatMap(({ missing: gone }) => gone.map((table) => [table.name, stagingName(table.name)] as const)),
    );
    for (const { table, columns } of work.create) {
      const name = staged.get(table.name) ?? table.name;
      const definitions = columns.map((column) => `${quote(column.name)} ${type(table, column)}`);
      if (staged.has(table.name)) await this.pool.query(`DROP TABLE IF EXISTS ${quote(name)}`);
      await this.pool.query(
        `CREATE TABLE IF NOT EXISTS ${quote(name)} (${definitions.join(', ')}, PRIMARY KEY (${table.primaryKey.map(quote).join(', ')}))
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
    return { refills, recreate, staged };
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
      prefix: this.prefix,
      documentTables: tables.tables,
      cursorsExist: existing.has(CURSORS_TABLE),
      hasCursor: async () => {
        const [rows] = await this.pool.query({
          sql: `SELECT 1 FROM ${quote(CURSORS_TABLE)} WHERE sink_id = ?`,
          values: [sinkId],
          timeout: this.timeoutMs,
        });
        return (rows as unknown[]).length > 0;
      },
    };
    return targetRecreations(
      target,
      missing,
      create.map(({ table }) => table),
    );
  }

  /** Re-fills the staged tables of `recreate` (`refillRecreated`) in the batch's transaction, before its changes. */
  private recreate(
    run: MysqlRun,
    batch: TableBatch,
    target: TargetCursor | null,
    recreate: readonly Recreation[],
    tombstones: string,
    stage: (name: string) => string,
  ): Promise<Refill[]> {
    const writer: RecreateWriter = {
      write: ({ layout }, changes) =>
        layout.kind === 'relational'
          ? writeMysqlRelational(run, renamedSpec(layout.spec, stage), tombstones, changes)
          : writeMysqlTable(run, { ...layout.table, name: stage(layout.table.name) }, tombstones, changes),
      clear: async (table, ownerIds) => {
        const owners = ownerIds === null ? '' : ` WHERE owner_id IN (${ownerIds.map(() => '?').join(', ')})`;
        await run(`DELETE FROM ${quote(stage(table))}${owners}`, [...(ownerIds ?? [])]);
      },
      stored: (spec, after) => storedPage(run, stage(spec.table.name), after),
      insert: (table, rows) => insertMysqlRelational(run, { ...table, name: stage(table.name) }, rows, false),
      count: async (table) => {
        const [rows] = await run(`SELECT count(*) AS n FROM ${quote(stage(table))}`, []);
        return Number((rows as Array<{ n: unknown }>)[0].n);
      },
    };
    return refillRecreated(writer, recreate, batch.live, refillPosition(target, batch.snapshotTo), batch.ownerIds);
  }

  /** Puts the staged tables under their names, once their rows are committed (one atomic RENAME). */
  private async unstage(staged: ReadonlyMap<string, string>): Promise<void> {
    if (staged.size === 0) return;
    const pairs = [...staged].map(([name, staging]) => `${quote(staging)} TO ${quote(name)}`);
    await this.pool.query({ sql: `RENAME TABLE ${pairs.join(', ')}`, timeout: this.timeoutMs });
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
    const run: MysqlRun = (sql, params) => this.pool.query({ sql, values: params, timeout: this.timeoutMs });
    for (;;) {
      const stored = await storedPage(run, table.name, after);
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

/** The staging name of a re-created table: within MySQL's 64 characters whatever the prefix. */
const stagingName = (name: string) =>
  `menu_sync_refill_${createHash('sha256').update(name).digest('hex').slice(0, 16)}`;

/** A page of a table's stored rows after `after`, in key order. */
async function storedPage(run: MysqlRun, table: string, after: StoredRow | null): Promise<StoredRow[]> {
  const [rows] = await run(
    `SELECT owner_id, id, resource FROM ${quote(table)}
      WHERE ? IS NULL OR (owner_id, id) > (?, ?) ORDER BY owner_id, id LIMIT ${REFILL_PAGE}`,
    [after?.owner_id ?? null, after?.owner_id ?? null, after?.id ?? null],
  );
  return (rows as Array<{ owner_id: string; id: unknown; resource: unknown }>).map((row) => ({
    owner_id: row.owner_id,
    id: String(row.id),
    resource: (typeof row.resource === 'string' ? JSON.parse(row.resource) : row.resource) as StoredRow['resource'],
  }));
}

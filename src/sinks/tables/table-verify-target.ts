import mysql from 'mysql2/promise';
import pg from 'pg';
import type { Change } from '../../changes/change.js';
import { decodeTargetCursor, encodeTargetCursor, TargetCursor } from './table-batch.js';
import type { TargetTable } from './table-columns.js';
import { guardedSocket } from './guarded-socket.js';
import { mysqlTargetSsl, postgresTargetSsl } from './table-tls.js';
import { writeMysqlTable } from './mysql-table.client.js';
import { writeMysqlRelational } from './mysql-relational.js';
import { writePostgresRelational } from './postgres-relational.js';
import type { RelationalType } from './relational-tables.js';
import { postgresInputRow, postgresWriteStatement } from './postgres-table.client.js';
import type { SchemaTable } from './table-schema.js';
import { CURSORS_TABLE } from './table-schema.js';
import type { TableTarget } from './table-target.js';
import type { RowKey } from './table-verify.js';

export type VerifiedTable = TargetTable & SchemaTable;

/**
 * What `--repair` does for one type: the resources to write again (their newest change, as a batch
 * writes it, rows and child rows), and those to remove (rows and child rows), by owner and id.
 */
export interface TableRepair {
  main: string;
  children: ReadonlyArray<{ name: string; parent: string }>;
  rewrite: Change[];
  remove: RowKey[];
  layout: { kind: 'document'; table: VerifiedTable } | { kind: 'relational'; spec: RelationalType };
}

/** A target as `sinks verify` reads and repairs it (docs/reference.md §12). */
export interface VerifyTarget {
  /** The sink's cursor and the rows of each table (of `ownerIds`, if given), in one snapshot of the target. */
  read(
    sinkId: string,
    tables: ReadonlyArray<{ name: string }>,
    ownerIds: readonly string[] | null,
  ): Promise<{ cursor: TargetCursor | null; rows: Map<string, Array<Record<string, unknown>>> }>;
  /**
   * Rewrites what differs in one transaction of the target, the sink's cursor row locked as a batch
   * locks it; false (nothing written) when the cursor moved from `cursor` meanwhile.
   */
  repair(sinkId: string, cursor: TargetCursor, tombstones: string, repairs: readonly TableRepair[]): Promise<boolean>;
  close(): Promise<void>;
}

export interface VerifyTargetOptions {
  target: TableTarget;
  resolve: () => Promise<string>;
  timeoutMs: number;
  /** PostgreSQL's schema; MySQL's tables carry their prefix in their names. */
  schema: string;
}

const pgQuote = (name: string) => `"${name.replace(/"/g, '""')}"`;
const myQuote = (name: string) => `\`${name.replace(/`/g, '``')}\``;
const sameCursor = (a: TargetCursor | null, b: TargetCursor) =>
  a !== null && a.epoch === b.epoch && encodeTargetCursor(a.cursor) === encodeTargetCursor(b.cursor);

/** A target of `options`' kind, on one connection made through the egress guard. */
export async function openVerifyTarget(options: VerifyTargetOptions): Promise<VerifyTarget> {
  const { target } = options;
  if (target.kind === 'postgres') {
    const client = new pg.Client({
      host: target.host,
      port: target.port,
      stream: () => guardedSocket(options.resolve, target.port),
      user: target.user,
      password: target.password ?? undefined,
      database: target.database,
      ssl: postgresTargetSsl(target),
      connectionTimeoutMillis: options.timeoutMs,
      statement_timeout: options.timeoutMs,
      application_name: 'menu-sync sinks verify',
    });
    await client.connect();
    return new PostgresVerifyTarget(client, options.schema);
  }
  const connection = await mysql.createConnection({
    host: target.host,
    port: target.port,
    stream: () => guardedSocket(options.resolve, target.port),
    user: target.user,
    password: target.password ?? undefined,
    database: target.database,
    ssl: mysqlTargetSsl(target),
    connectTimeout: options.timeoutMs,
    charset: 'utf8mb4',
    timezone: 'Z',
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
  return new MysqlVerifyTarget(connection);
}

class PostgresVerifyTarget implements VerifyTarget {
  constructor(
    private readonly client: pg.Client,
    private readonly schema: string,
  ) {}

  async read(sinkId: string, tables: ReadonlyArray<{ name: string }>, ownerIds: readonly string[] | null) {
    await this.client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    try {
      const cursor = await this.cursor(sinkId, '');
      const rows = new Map<string, Array<Record<string, unknown>>>();
      for (const table of tables) {
        const exists = await this.client.query(`SELECT to_regclass($1) IS NOT NULL AS found`, [
          `${pgQuote(this.schema)}.${pgQuote(table.name)}`,
        ]);
        if (!(exists.rows[0] as { found: boolean }).found) rows.set(table.name, []);
        else
          rows.set(
            table.name,
            (
              await this.client.query(
                `SELECT * FROM ${this.name(table.name)} WHERE $1::text[] IS NULL OR owner_id = ANY($1::text[])`,
                [ownerIds],
              )
            ).rows,
          );
      }
      return { cursor, rows };
    } finally {
      await this.client.query('ROLLBACK');
    }
  }

  async repair(sinkId: string, cursor: TargetCursor, tombstones: string, repairs: readonly TableRepair[]) {
    await this.client.query('BEGIN');
    try {
      if (!sameCursor(await this.cursor(sinkId, ' FOR UPDATE'), cursor)) {
        await this.client.query('ROLLBACK');
        return false;
      }
      for (const repair of repairs) {
        const { main, children, rewrite, remove, layout } = repair;
        const keys = [...remove, ...rewrite.map((change) => ({ owner_id: change.owner_id ?? '', id: change.id }))];
        const matching = (alias: string, parent: string) =>
          `jsonb_to_recordset($1::jsonb) AS k(owner_id text, id text) WHERE ${alias}.owner_id = k.owner_id AND ${alias}.${pgQuote(parent)}::text = k.id`;
        // A row edited by hand keeps its seq: cleared, the guarded write puts it back.
        if (keys.length > 0)
          await this.client.query(`UPDATE ${this.name(main)} t SET seq = NULL FROM ${matching('t', 'id')}`, [
            JSON.stringify(keys),
          ]);
        if (remove.length > 0)
          for (const { name, parent } of [{ name: main, parent: 'id' }, ...children])
            await this.client.query(`DELETE FROM ${this.name(name)} t USING ${matching('t', parent)}`, [
              JSON.stringify(remove),
            ]);
        if (rewrite.length === 0) continue;
        if (layout.kind === 'relational')
          await writePostgresRelational(this.client, this.schema, tombstones, layout.spec, rewrite);
        else
          await this.client.query(postgresWriteStatement(this.schema, layout.table, tombstones), [
            JSON.stringify(rewrite.map((change) => postgresInputRow(layout.table, change))),
            layout.table.type,
          ]);
      }
      await this.client.query('COMMIT');
      return true;
    } catch (error) {
      await this.client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  }

  close(): Promise<void> {
    return this.client.end();
  }

  private name(table: string): string {
    return `${pgQuote(this.schema)}.${pgQuote(table)}`;
  }

  private async cursor(sinkId: string, lock: string): Promise<TargetCursor | null> {
    const exists = await this.client.query(`SELECT to_regclass($1) IS NOT NULL AS found`, [this.name(CURSORS_TABLE)]);
    if (!(exists.rows[0] as { found: boolean }).found) return null;
    const { rows } = await this.client.query<{ cursor: string; epoch: string }>(
      `SELECT "cursor", epoch FROM ${this.name(CURSORS_TABLE)} WHERE sink_id = $1${lock}`,
      [sinkId],
    );
    return rows.length === 0 ? null : { cursor: decodeTargetCursor(rows[0].cursor), epoch: Number(rows[0].epoch) };
  }
}

class MysqlVerifyTarget implements VerifyTarget {
  constructor(private readonly connection: mysql.Connection) {}

  async read(sinkId: string, tables: ReadonlyArray<{ name: string }>, ownerIds: readonly string[] | null) {
    await this.connection.query('START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY');
    try {
      const cursor = await this.cursor(sinkId, '');
      const rows = new Map<string, Array<Record<string, unknown>>>();
      for (const table of tables) {
        if (!(await this.exists(table.name))) rows.set(table.name, []);
        else {
          const owners = ownerIds === null ? '' : ` WHERE owner_id IN (${ownerIds.map(() => '?').join(', ')})`;
          const [found] = await this.connection.query(`SELECT * FROM ${myQuote(table.name)}${owners}`, [
            ...(ownerIds ?? []),
          ]);
          rows.set(table.name, found as Array<Record<string, unknown>>);
        }
      }
      return { cursor, rows };
    } finally {
      await this.connection.query('ROLLBACK');
    }
  }

  async repair(sinkId: string, cursor: TargetCursor, tombstones: string, repairs: readonly TableRepair[]) {
    await this.connection.beginTransaction();
    try {
      if (!sameCursor(await this.cursor(sinkId, ' FOR UPDATE'), cursor)) {
        await this.connection.rollback();
        return false;
      }
      for (const repair of repairs) {
        const { main, children, rewrite, remove, layout } = repair;
        const keys = [...remove, ...rewrite.map((change) => ({ owner_id: change.owner_id ?? '', id: change.id }))];
        const where = (parent: string, count: number) =>
          Array.from({ length: count }, () => `(owner_id = ? AND ${myQuote(parent)} = ?)`).join(' OR ');
        const values = (list: RowKey[]) => list.flatMap((key) => [key.owner_id, key.id]);
        const run = (sql: string, params: unknown[]) => this.connection.query(sql, params);
        // A row edited by hand keeps its seq: cleared, the guarded write puts it back.
        if (keys.length > 0)
          await run(`UPDATE ${myQuote(main)} SET seq = NULL WHERE ${where('id', keys.length)}`, values(keys));
        if (remove.length > 0)
          for (const { name, parent } of [{ name: main, parent: 'id' }, ...children])
            await run(`DELETE FROM ${myQuote(name)} WHERE ${where(parent, remove.length)}`, values(remove));
        if (rewrite.length === 0) continue;
        if (layout.kind === 'relational') await writeMysqlRelational(run, layout.spec, tombstones, rewrite);
        else await writeMysqlTable(run, layout.table, tombstones, rewrite);
      }
      await this.connection.commit();
      return true;
    } catch (error) {
      await this.connection.rollback().catch(() => undefined);
      throw error;
    }
  }

  close(): Promise<void> {
    return this.connection.end();
  }

  private async exists(table: string): Promise<boolean> {
    const [rows] = await this.connection.query(
      `SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`,
      [table],
    );
    return (rows as unknown[]).length > 0;
  }

  private async cursor(sinkId: string, lock: string): Promise<TargetCursor | null> {
    if (!(await this.exists(CURSORS_TABLE))) return null;
    const [rows] = await this.connection.query(
      `SELECT \`cursor\`, epoch FROM ${myQuote(CURSORS_TABLE)} WHERE sink_id = ?${lock}`,
      [sinkId],
    );
    const found = rows as Array<{ cursor: string; epoch: string }>;
    return found.length === 0 ? null : { cursor: decodeTargetCursor(found[0].cursor), epoch: Number(found[0].epoch) };
  }
}

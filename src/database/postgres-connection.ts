import { createHash } from 'node:crypto';
import pg from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver.js';
import { sessionsOf, statementFor } from './database-sessions.js';

/** The node-postgres pool under a TypeORM data source: for statements that skip the query runner. */
export function sharedPool(dataSource: DataSource): pg.Pool {
  return (dataSource.driver as PostgresDriver).master as pg.Pool;
}

/**
 * Anything a statement can run on and answer rows: the data source, a transaction's manager or
 * runner, or a client of a pool of its own (`sessionOf`).
 */
export interface SqlSession {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- rows as pg gives them, typed by the caller
  query<T = any>(sql: string, params?: unknown[]): Promise<T[]>;
}

/** A pg client as a SqlSession. */
export function sessionOf(client: pg.ClientBase): SqlSession {
  return { query: async (sql, params) => (await client.query(sql, params)).rows };
}

/**
 * A pool of its own with the data source's connection settings (and `config` over them), for a path
 * that must not queue behind the shared pool or needs sessions set apart (`settings`: run-time
 * parameters every session starts with, added to the startup options the settings already have);
 * whoever creates it ends it. An idle connection that the server ends (restart, terminate) must not
 * crash the process, and a connection whose query failed is discarded by pg's pool, so a database
 * that was restarted gets fresh sessions. Behind a transaction pooler (DATABASE_DIRECT_URL set) no
 * session holds settings: `settings` are left out (set them for the role instead, ALTER ROLE … SET).
 */
export function poolOfItsOwn(
  dataSource: DataSource,
  config: pg.PoolConfig,
  settings: Record<string, string> = {},
): pg.Pool {
  const shared = sharedPool(dataSource).options;
  const kept = sessionsOf(dataSource).sessionState ? settings : {};
  const options = [shared.options, ...Object.entries(kept).map(([name, value]) => `-c ${name}=${value}`)]
    .filter(Boolean)
    .join(' ');
  const pool = new pg.Pool({ ...shared, allowExitOnIdle: true, ...config, ...(options === '' ? {} : { options }) });
  pool.on('error', () => undefined);
  return pool;
}

/**
 * A pool of its own (poolOfItsOwn) opened on first use and ended by `end`, for a repository that
 * owns one: the next use after `end` opens a new one.
 */
export class LazyPool {
  private pool?: pg.Pool;

  constructor(
    private readonly dataSource: DataSource,
    private readonly config: pg.PoolConfig,
    private readonly settings: Record<string, string> = {},
  ) {}

  get(): pg.Pool {
    this.pool ??= poolOfItsOwn(this.dataSource, this.config, this.settings);
    return this.pool;
  }

  async end(): Promise<void> {
    const pool = this.pool;
    this.pool = undefined;
    await pool?.end();
  }
}

/**
 * A statement as a prepared statement named after its text, on `pool` (by default the shared
 * one): each pooled connection parses it once, and plans it once it has run it a few times
 * (PostgreSQL then keeps a generic plan when it costs no more). For the hot reads, parsing and
 * planning are a large share of the cost. With DATABASE_PREPARED_STATEMENTS=off, an unnamed statement.
 */
export async function preparedQuery<T>(
  dataSource: DataSource,
  sql: string,
  params: unknown[],
  pool = sharedPool(dataSource),
): Promise<T[]> {
  return (await pool.query(statementFor(dataSource, { name: statementName(sql), text: sql, values: params }))).rows;
}

/**
 * preparedQuery on the session of a connected query runner (inside its transaction, if one is
 * open): one of openSession's, whose statements stay prepared.
 */
export async function preparedOn<T>(runner: QueryRunner, sql: string, params: unknown[]): Promise<T[]> {
  return (await postgresConnection(runner).query({ name: statementName(sql), text: sql, values: params })).rows;
}

function statementName(sql: string): string {
  return `menu_sync_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
}

/**
 * The node-postgres client under a connected TypeORM query runner, for what the runner cannot
 * send: several statements in one round trip (the simple query protocol), answered as one result
 * per statement. The runner does not see a transaction begun this way: whoever begins one ends it.
 */
export function postgresConnection(runner: QueryRunner): pg.ClientBase {
  const connection = (runner as unknown as { databaseConnection?: pg.ClientBase }).databaseConnection;
  if (connection === undefined) throw new Error('the query runner has no connection yet');
  return connection;
}

/** Several statements in one round trip: their results, in order. */
export async function queryBatch(runner: QueryRunner, statements: string[]): Promise<pg.QueryResult[]> {
  const results = await postgresConnection(runner).query(statements.join(';\n'));
  return (Array.isArray(results) ? results : [results]) as pg.QueryResult[];
}

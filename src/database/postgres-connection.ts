import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver.js';

/** The node-postgres pool under a TypeORM data source: for statements that skip the query runner. */
export function sharedPool(dataSource: DataSource): pg.Pool {
  return (dataSource.driver as PostgresDriver).master as pg.Pool;
}

/**
 * A statement on the shared pool as a prepared statement named after its text: each pooled
 * connection parses it once, and plans it once it has run it a few times (PostgreSQL then keeps a
 * generic plan when it costs no more). For the hot reads: planning an `as_of` statement took about
 * as long as running it for a page, and parsing and planning a read by id was a third of its cost.
 */
export async function preparedQuery<T>(dataSource: DataSource, sql: string, params: unknown[]): Promise<T[]> {
  const name = `menu_sync_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
  return (await sharedPool(dataSource).query({ name, text: sql, values: params })).rows;
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

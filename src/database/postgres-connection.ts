import type pg from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver.js';

/** The node-postgres pool under a TypeORM data source: for statements that skip the query runner. */
export function sharedPool(dataSource: DataSource): pg.Pool {
  return (dataSource.driver as PostgresDriver).master as pg.Pool;
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

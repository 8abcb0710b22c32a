import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { TEST_SERVER_URL } from './database.js';
import { makePassword } from './table-sinks.js';

export interface PostgresTarget {
  database: string;
  role: string;
  password: string;
  /** `postgres://role:password@127.0.0.1:5432/database`. */
  url: string;
  /** A superuser connection to the database (reads the tables, changes them by hand). */
  admin: pg.Client;
  drop(): Promise<void>;
}

/** A fresh target database and a role with a password that may connect to it and create schemas in it. */
export async function createPostgresTarget(): Promise<PostgresTarget> {
  const suffix = `${process.pid}_${randomBytes(4).toString('hex')}`;
  const database = `menu_sync_target_${suffix}`;
  const role = `menu_sync_writer_${suffix}`;
  const password = makePassword();
  const server = new pg.Client({ connectionString: TEST_SERVER_URL });
  await server.connect();
  await server.query(`CREATE DATABASE ${database} TEMPLATE template0`);
  await server.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password.replace(/'/g, "''")}'`);
  await server.query(`GRANT CONNECT, CREATE ON DATABASE ${database} TO ${role}`);
  const url = new URL(TEST_SERVER_URL);
  url.pathname = `/${database}`;
  const admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  return {
    database,
    role,
    password,
    url: `postgres://${role}:${encodeURIComponent(password)}@127.0.0.1:${url.port || 5432}/${database}`,
    admin,
    drop: async () => {
      await admin.end();
      await server.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await server.query(`DROP ROLE IF EXISTS ${role}`);
      await server.end();
    },
  };
}

/** A table's column names in order. */
export async function postgresColumns(target: PostgresTarget, schema: string, table: string): Promise<string[]> {
  const { rows } = await target.admin.query(
    `SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`,
    [schema, table],
  );
  return rows.map((row) => row.column_name as string);
}

// A target database for table sinks on the local PostgreSQL (the bench's server), with a login role
// of its own that has a password (as a real target's would), dropped with it.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { admin, databaseUrl, SERVER_URL } from './database.js';

const suffix = () => `${process.pid}_${randomBytes(3).toString('hex')}`;
export const makePassword = () => `pw/${randomBytes(12).toString('hex')}@:x`;

/** A target database on the local PostgreSQL and a role with a password that may create schemas in it. */
export async function createPostgresTarget(types) {
  const name = `menu_sync_bench_target_${suffix()}`;
  const role = `menu_sync_bench_writer_${suffix()}`;
  const password = makePassword();
  await admin(`CREATE DATABASE ${name} TEMPLATE template0`);
  await admin(`CREATE ROLE ${role} LOGIN PASSWORD '${password.replace(/'/g, "''")}'`);
  await admin(`GRANT CONNECT, CREATE ON DATABASE ${name} TO ${role}`);
  const server = new URL(SERVER_URL);
  const adminUrl = databaseUrl(name);
  const url = `postgres://${role}:${encodeURIComponent(password)}@127.0.0.1:${server.port || 5432}/${name}`;
  const one = async (sql, params = []) => {
    const connection = new pg.Client({ connectionString: adminUrl, application_name: 'menu-sync-bench' });
    await connection.connect();
    try {
      return (await connection.query(sql, params)).rows;
    } finally {
      await connection.end();
    }
  };
  return {
    database: name,
    url,
    adminUrl,
    /** The tables as the client creates them (its own schema code, on a client of its own). */
    async createTables(dist, schema) {
      const client = new dist.PostgresTableClient({
        target: {
          kind: 'postgres',
          host: '127.0.0.1',
          port: Number(server.port || 5432),
          user: role,
          password,
          database: name,
          tls: 'disable',
        },
        resolve: async () => '127.0.0.1',
        timeoutMs: 30_000,
        schema,
      });
      try {
        await client.ensure(types, dist.sinkTables(types, ''));
      } finally {
        await client.close();
      }
    },
    rows: one,
    count: async (schema) => Number((await one(`SELECT count(*)::int AS n FROM ${schema}.products`))[0].n),
    cursor: async (schema, sinkId) => {
      try {
        const rows = await one(`SELECT "cursor" FROM ${schema}.menu_sync_sink_cursors WHERE sink_id = $1`, [sinkId]);
        return rows[0]?.cursor ?? null;
      } catch (error) {
        if (error.code === '42P01' || error.code === '3F000') return null;
        throw error;
      }
    },
    drop: async () => {
      await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin(`DROP ROLE IF EXISTS ${role}`);
    },
  };
}

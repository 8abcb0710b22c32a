import pg from 'pg';
import type { AppConfig } from '../config/app-config.js';
import { openDatabase } from '../database/database-target.js';
import { postgresTls } from '../database/database-tls.js';
import type { SqlReader } from '../observability/status.repository.js';

/**
 * Runs `work` on the daemon's database through a bare pg pool (no TypeORM, no Nest: what a
 * read-only command needs), attaching to the embedded PostgreSQL a running daemon started.
 */
export async function onDaemonSql<T>(config: AppConfig, work: (sql: SqlReader) => Promise<T>): Promise<T> {
  const database = await openDatabase(config, { attach: true });
  const { url, ssl } = postgresTls(database.url);
  const pool = new pg.Pool({
    connectionString: url,
    ...(ssl === undefined ? {} : { ssl }),
    max: 4,
    connectionTimeoutMillis: 3000,
    application_name: 'menu-sync cli',
  });
  try {
    return await work({ query: async (sql, parameters) => (await pool.query(sql, parameters)).rows });
  } finally {
    await pool.end();
    await database.close();
  }
}

import pg from 'pg';

/**
 * PgBouncer in transaction mode in front of the test server (test/services.sh starts it on
 * 127.0.0.1:6432), or TEST_POOLER_DATABASE_URL: any database of the server by its name.
 */
export const POOLER_SERVER_URL = process.env.TEST_POOLER_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:6432/postgres';

/** `databaseUrl`'s database, through the pooler. */
export function pooledUrl(databaseUrl: string): string {
  const url = new URL(POOLER_SERVER_URL);
  url.pathname = new URL(databaseUrl).pathname;
  return url.toString();
}

/** The rows of a `SHOW …` of the pooler's admin console about `database`. */
async function show(what: 'SERVERS' | 'CLIENTS', database: string): Promise<Array<Record<string, string>>> {
  const url = new URL(POOLER_SERVER_URL);
  url.pathname = '/pgbouncer';
  const admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    const { rows } = await admin.query<Record<string, string>>(`SHOW ${what}`);
    return rows.filter((row) => row.database === database);
  } finally {
    await admin.end();
  }
}

/** The PostgreSQL backends the pooler holds for `database` (SHOW SERVERS). */
export async function poolerBackends(database: string): Promise<Set<number>> {
  return new Set((await show('SERVERS', database)).map((row) => Number(row.remote_pid)));
}

/** How many clients are connected to the pooler for `database` (SHOW CLIENTS). */
export async function poolerClients(database: string): Promise<number> {
  return (await show('CLIENTS', database)).length;
}

import pg from 'pg';
import { postgresTls } from './database-tls.js';

/** How long the probe's last statement may wait while another client holds a transaction: only a pooler makes it wait. */
const PROBE_WAIT_MS = 3000;

/**
 * Whether `config` reaches PostgreSQL through a transaction-mode pooler (PgBouncer, RDS Proxy,
 * Supavisor), which hands each transaction of a client to whichever server session is free. Two
 * clients: the first asks its backend's pid; the second opens a transaction and asks its own; the
 * first asks again. A session of its own answers the same pid twice, and never the second
 * client's; through a transaction pooler the second client is given the first one's idle backend
 * (or the first one another backend, or none until the transaction ends).
 */
export async function isTransactionPooled(config: pg.ClientConfig): Promise<boolean> {
  const first = new pg.Client({ ...config, application_name: 'menu-sync probe' });
  const second = new pg.Client({ ...config, application_name: 'menu-sync probe' });
  first.on('error', () => undefined);
  second.on('error', () => undefined);
  try {
    await Promise.all([first.connect(), second.connect()]);
    const before = await backendPid(first);
    await second.query('BEGIN');
    const other = await backendPid(second);
    if (other === before) return true;
    let timer: NodeJS.Timeout | undefined;
    const after = await Promise.race([
      backendPid(first),
      new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), PROBE_WAIT_MS))),
    ]).finally(() => clearTimeout(timer));
    return after !== before;
  } finally {
    await Promise.all([first.end().catch(() => undefined), second.end().catch(() => undefined)]);
  }
}

async function backendPid(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return rows[0].pid;
}

/** Refuses (PooledDirectUrlError) a direct URL behind a transaction pooler; `explicit`: it is DATABASE_DIRECT_URL. */
export async function assertDirectUrl(database: { directUrl: string }, explicit: boolean): Promise<void> {
  const tls = postgresTls(database.directUrl);
  const config = { connectionString: tls.url, connectionTimeoutMillis: 3000 };
  if (await isTransactionPooled(tls.ssl === undefined ? config : { ...config, ssl: tls.ssl }))
    throw new PooledDirectUrlError(explicit ? 'DATABASE_DIRECT_URL' : 'DATABASE_URL');
}

/** A URL that must reach PostgreSQL directly was found behind a transaction pooler: the start is refused (exit 2). */
export class PooledDirectUrlError extends Error {
  readonly code = 'direct_url_pooled';
  readonly exitCode = 2;

  constructor(setting: 'DATABASE_URL' | 'DATABASE_DIRECT_URL') {
    super(
      setting === 'DATABASE_DIRECT_URL'
        ? 'DATABASE_DIRECT_URL goes through a transaction-mode pooler (two statements of one connection were ' +
            'answered by two server sessions): it must name the database itself, or a session-mode pooler'
        : 'DATABASE_URL goes through a transaction-mode pooler (two statements of one connection were answered by ' +
            'two server sessions): set DATABASE_DIRECT_URL to the database itself, for the leases and LISTEN',
    );
  }
}

import { execFile } from 'node:child_process';
import { userInfo } from 'node:os';
import { promisify } from 'node:util';
import pg from 'pg';
import type { TestDatabase } from './database.js';

const run = promisify(execFile);

/** The cluster test/services.sh makes: a hot standby of the local primary on 127.0.0.1:5433. */
const LOCAL_REPLICA_CLUSTER = 'menu_sync_replica';

/**
 * The streaming replica of the tests' server: TEST_READ_DATABASE_URL, or the local one
 * test/services.sh makes (when the tests use the local primary).
 */
function replicaServerUrl(): string {
  if (process.env.TEST_READ_DATABASE_URL !== undefined) return process.env.TEST_READ_DATABASE_URL;
  if (process.env.TEST_DATABASE_URL !== undefined)
    throw new Error('TEST_DATABASE_URL names a server elsewhere: set TEST_READ_DATABASE_URL to a replica of it');
  return 'postgres://postgres@127.0.0.1:5433/postgres';
}

/** `database` as the replica serves it (CREATE DATABASE reaches a standby through the WAL). */
export function replicaUrlOf(database: TestDatabase): string {
  const url = new URL(replicaServerUrl());
  url.pathname = `/${database.name}`;
  return url.toString();
}

/** Runs `sql` on the replica's copy of `database`. */
export async function onReplica<T = Record<string, unknown>>(database: TestDatabase, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: replicaUrlOf(database) });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

/**
 * Stops or starts the local replica's cluster (pg_ctlcluster: as root, as CI runs, or through
 * `sudo -n`). A stop is fast: sessions are ended, as when a server goes away.
 */
export async function replicaCluster(action: 'stop' | 'start'): Promise<void> {
  const { stdout } = await run('pg_lsclusters', ['-h']);
  const version = stdout
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .find((fields) => fields[1] === LOCAL_REPLICA_CLUSTER)?.[0];
  if (version === undefined) throw new Error(`no cluster ${LOCAL_REPLICA_CLUSTER}: run test/services.sh`);
  const command = [
    'pg_ctlcluster',
    '--skip-systemctl-redirect',
    version,
    LOCAL_REPLICA_CLUSTER,
    action,
    ...(action === 'stop' ? ['-m', 'fast'] : []),
  ];
  if (userInfo().uid === 0) await run(command[0], command.slice(1));
  else await run('sudo', ['-n', ...command]);
}

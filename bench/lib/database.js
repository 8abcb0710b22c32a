// Bench databases on the local PostgreSQL (like test/support/database.ts, in plain JS):
// one template database migrated by the real CLI, then a cheap clone per measurement.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { runToCompletion } from './processes.js';

/** The server the bench creates its databases on (trust auth, as CI's). */
export const SERVER_URL =
  process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const created = new Set();

export async function admin(sql, params = []) {
  const client = new pg.Client({ connectionString: SERVER_URL, application_name: 'menu-sync-bench' });
  await client.connect();
  try {
    return await client.query(sql, params);
  } finally {
    await client.end();
  }
}

export function databaseUrl(name) {
  const url = new URL(SERVER_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

function freshName(suffix) {
  return `menu_sync_bench_${process.pid}_${randomBytes(3).toString('hex')}_${suffix}`
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '_');
}

/** CREATE DATABASE, then `node dist/src/main.js migrate` against it. Returns its name. */
export async function createMigratedDatabase({ cwd, env, suffix = 'template' }) {
  const name = freshName(suffix);
  await admin(`CREATE DATABASE ${name} ENCODING 'UTF8' TEMPLATE template0`);
  created.add(name);
  await runToCompletion('node', ['dist/src/main.js', 'migrate'], {
    cwd,
    env: { ...env, DATABASE_URL: databaseUrl(name), LOG_LEVEL: 'warn' },
    timeoutMs: 60_000,
  });
  return name;
}

/** A copy of `template` (which must have no open connection). */
export async function cloneDatabase(template, suffix) {
  const name = freshName(suffix);
  await admin(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  created.add(name);
  return name;
}

export async function dropDatabase(name) {
  await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  created.delete(name);
}

/** Leaves `name` in place when the process ends (bench/query --keep-database). */
export function keepDatabase(name) {
  created.delete(name);
}

/** Drops every database this process created and has not dropped yet. */
export async function dropAllDatabases() {
  for (const name of [...created]) {
    await dropDatabase(name).catch((error) => console.error(`could not drop ${name}: ${error.message}`));
  }
}

export async function query(name, sql, params = []) {
  const client = new pg.Client({ connectionString: databaseUrl(name), application_name: 'menu-sync-bench' });
  await client.connect();
  try {
    return await client.query(sql, params);
  } finally {
    await client.end();
  }
}

/** PgBouncer in transaction mode, as test/services.sh starts it (the `--pooler` runs). */
export const POOLER_URL = process.env.BENCH_POOLER_URL ?? 'postgres://postgres@127.0.0.1:6432/postgres';

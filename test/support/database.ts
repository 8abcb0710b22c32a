import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createDataSource } from '../../src/database/data-source.factory.js';
import { migrateDatabase } from '../../src/database/migrate.js';
import type { DataSource } from 'typeorm';

/** The server tests create their databases on; CI's local PostgreSQL by default. */
export const TEST_SERVER_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** A fresh database with every real migration applied; one per test file. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `menu_sync_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  await admin(`CREATE DATABASE ${name} ENCODING 'UTF8' TEMPLATE template0`);
  const url = new URL(TEST_SERVER_URL);
  url.pathname = `/${name}`;
  await migrateDatabase(url.toString());
  return { url: url.toString(), name, drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_SERVER_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

export async function openDataSource(url: string, poolSize = 10): Promise<DataSource> {
  const dataSource = createDataSource({ url, poolSize });
  await dataSource.initialize();
  return dataSource;
}

/**
 * A fresh migrated database and a data source on it, made before the tests of the calling block
 * (or file) and dropped after them. Read its fields inside hooks and tests, not when declaring.
 */
export function useDatabase(poolSize = 10): { readonly url: string; readonly dataSource: DataSource } {
  let database: TestDatabase | undefined;
  let dataSource: DataSource | undefined;
  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource(database.url, poolSize);
  });
  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });
  return {
    get url() {
      return database!.url;
    },
    get dataSource() {
      return dataSource!;
    },
  };
}

import type { DynamicModule, INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config.js';
import { createDataSource } from '../database/data-source.factory.js';
import { openDatabase, type OpenDatabase } from '../database/database-target.js';
import { migrateDatabase } from '../database/migrate.js';

interface Options {
  /** Apply pending migrations first (default: unless MIGRATIONS_RUN=false). */
  migrate?: boolean;
}

/**
 * Runs `work` on the daemon's database, attaching to the embedded PostgreSQL a running daemon
 * started (or starting it for the command), and closes it after. A command's few connections go
 * to DATABASE_DIRECT_URL: its locks (a replay's, a reconcile's) are session locks.
 */
export async function onDaemonDatabase<T>(
  config: AppConfig,
  work: (databaseUrl: string, database: OpenDatabase) => Promise<T>,
  { migrate = config.MIGRATIONS_RUN }: Options = {},
): Promise<T> {
  const database = await openDatabase(config, { attach: true });
  try {
    if (migrate) await migrateDatabase(database.migrationUrl);
    return await work(database.directUrl, database);
  } finally {
    await database.close();
  }
}

/** Runs `work` with a data source of `poolSize` connections on the daemon's database. */
export function withDaemonDataSource<T>(
  config: AppConfig,
  poolSize: number,
  work: (dataSource: DataSource) => Promise<T>,
  options: Options = {},
): Promise<T> {
  return onDaemonDatabase(
    config,
    async (url) => {
      const dataSource = createDataSource({ url, poolSize });
      await dataSource.initialize();
      try {
        return await work(dataSource);
      } finally {
        await dataSource.destroy();
      }
    },
    options,
  );
}

/** Runs `work` in a Nest application context (no HTTP) of the module made for the daemon's database. */
export function withDaemonContext<T>(
  config: AppConfig,
  module: (databaseUrl: string) => DynamicModule,
  work: (app: INestApplicationContext) => Promise<T>,
): Promise<T> {
  return onDaemonDatabase(config, async (url) => {
    const app = await NestFactory.createApplicationContext(module(url));
    try {
      return await work(app);
    } finally {
      await app.close();
    }
  });
}

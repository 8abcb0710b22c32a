import { DataSource, DataSourceOptions } from 'typeorm';
import { MIGRATIONS } from '../../migrations/index.js';

export interface DatabaseOptions {
  url: string;
  poolSize: number;
}

export function dataSourceOptions({ url, poolSize }: DatabaseOptions): DataSourceOptions {
  return {
    type: 'postgres',
    url,
    synchronize: false,
    migrationsRun: false,
    migrations: MIGRATIONS,
    migrationsTransactionMode: 'each',
    entities: [],
    logging: false,
    extra: {
      max: poolSize,
      connectionTimeoutMillis: 3000,
      application_name: 'menu-sync',
    },
  };
}

export function createDataSource(options: DatabaseOptions): DataSource {
  return new DataSource(dataSourceOptions(options));
}

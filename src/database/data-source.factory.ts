import { DataSource, DataSourceOptions } from 'typeorm';
import { MIGRATIONS } from '../../migrations/index.js';
import { postgresTls } from './database-tls.js';

export interface DatabaseOptions {
  url: string;
  poolSize: number;
  /**
   * How long a pooled connection may sit idle before it is closed (0: never); pg's 10 s when not
   * given. The daemon keeps its sessions for minutes (DATABASE_POOL_IDLE_SECONDS): a new
   * PostgreSQL session pays again for every page of shared buffers it touches and every block of
   * memory it grows into, and a big read on fresh sessions cost about twice its PostgreSQL time.
   */
  idleSeconds?: number;
}

export function dataSourceOptions({ url, poolSize, idleSeconds }: DatabaseOptions): DataSourceOptions {
  const tls = postgresTls(url);
  return {
    type: 'postgres',
    url: tls.url,
    synchronize: false,
    migrationsRun: false,
    migrations: MIGRATIONS,
    migrationsTransactionMode: 'each',
    entities: [],
    logging: false,
    extra: {
      max: poolSize,
      connectionTimeoutMillis: 3000,
      ...(idleSeconds === undefined ? {} : { idleTimeoutMillis: idleSeconds * 1000 }),
      application_name: 'menu-sync',
      ...(tls.ssl === undefined ? {} : { ssl: tls.ssl }),
    },
  };
}

export function createDataSource(options: DatabaseOptions): DataSource {
  return new DataSource(dataSourceOptions(options));
}

import type { FactoryProvider } from '@nestjs/common';
import type { DataSource } from 'typeorm';

/** The replica's data source (DATABASE_READ_URL), opened on first use by ReadReplicaRepository; null without one. */
export const READ_DATA_SOURCE = 'READ_DATA_SOURCE';

/** ReadRouter's settings: null without a replica. */
export const READ_REPLICA_OPTIONS = 'READ_REPLICA_OPTIONS';

export interface ReadReplicaOptions {
  /** The lag beyond which reads go to the primary (READ_REPLICA_MAX_LAG). */
  maxLagMs: number;
}

type Repository<T> = new (dataSource: DataSource) => T;

/** The token of a repository's second instance, on the replica. */
export const replicaOf = (repository: Repository<unknown>): string => `${repository.name} on the replica`;

/**
 * Provides `repository` again on the replica's data source (null without DATABASE_READ_URL): the
 * instance the reads ReadRouter sends to the replica use, with pools of its own there.
 */
export function replicaProvider<T>(repository: Repository<T>): FactoryProvider<T | null> {
  return {
    provide: replicaOf(repository),
    inject: [READ_DATA_SOURCE],
    useFactory: (dataSource: DataSource | null) => (dataSource === null ? null : new repository(dataSource)),
  };
}

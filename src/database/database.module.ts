import { DynamicModule, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { dataSourceOptions, DatabaseOptions } from './data-source.factory.js';
import { DirectSessions, SESSION_OPTIONS, SessionOptions } from './direct-sessions.service.js';
import { READ_DATA_SOURCE, READ_REPLICA_OPTIONS, ReadReplicaOptions } from './read-replica.js';
import { ReadReplicaRepository } from './read-replica.repository.js';
import { ReadRouter } from './read-router.service.js';

export interface DatabaseModuleOptions extends DatabaseOptions {
  /** A streaming replica that serves reads (DATABASE_READ_URL), and when reads leave it. */
  replica?: ReadReplicaOptions & { url: string };
  /** Where sessions go when `url` is a transaction pooler (DATABASE_DIRECT_URL), and what its sessions may hold. */
  sessions?: SessionOptions;
}

/**
 * The primary's data source (its sessions routed by DirectSessions), and the replica's
 * (READ_DATA_SOURCE) with the ReadRouter that sends reads there.
 */
@Module({})
export class DatabaseModule {
  static forRoot({ replica, sessions = {}, ...options }: DatabaseModuleOptions): DynamicModule {
    return {
      module: DatabaseModule,
      global: true,
      imports: [TypeOrmModule.forRoot({ ...dataSourceOptions(options), retryAttempts: 2, retryDelay: 1000 })],
      providers: [
        {
          provide: READ_DATA_SOURCE,
          useFactory: () =>
            replica === undefined ? null : new DataSource(dataSourceOptions({ ...options, url: replica.url })),
        },
        { provide: READ_REPLICA_OPTIONS, useValue: replica === undefined ? null : { maxLagMs: replica.maxLagMs } },
        { provide: SESSION_OPTIONS, useValue: { idleSeconds: options.idleSeconds, ...sessions } },
        DirectSessions,
        ReadReplicaRepository,
        ReadRouter,
      ],
      exports: [READ_DATA_SOURCE, ReadRouter],
    };
  }
}

import { Inject, Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { createDataSource } from './data-source.factory.js';
import { directClientConfig, directUrlProbe, registerSessions } from './database-sessions.js';

/** DatabaseModule's session settings (DATABASE_DIRECT_URL, DATABASE_PREPARED_STATEMENTS). */
export const SESSION_OPTIONS = 'DATABASE_SESSION_OPTIONS';

export interface SessionOptions {
  /** DATABASE_DIRECT_URL; unset: the pooled URL is the direct one (a probe finding it pooled names DATABASE_URL). */
  directUrl?: string;
  /** Named prepared statements on the pooled URL; unset: on. */
  preparedStatements?: boolean;
  /** Probe the direct URL for a transaction pooler on every new session (the daemon does). */
  probe?: boolean;
  idleSeconds?: number;
}

/**
 * Sessions that the leases, the projector's lanes and the reconcile and rebuild locks hold, each
 * for as long as its work lasts: a few, whatever DATABASE_POOL_SIZE (LISTEN connections come on
 * top, one per channel).
 */
export const DIRECT_SESSIONS = 8;

/**
 * The direct data source on DATABASE_DIRECT_URL (none when it is unset: the pooled one is direct),
 * registered as where the pooled data source's sessions go (database-sessions.ts), from module
 * initialisation, before any lease or LISTEN opens, to the end.
 */
@Injectable()
export class DirectSessions implements OnModuleInit, OnApplicationShutdown {
  private direct?: DataSource;

  constructor(
    @InjectDataSource() private readonly pooled: DataSource,
    @Inject(SESSION_OPTIONS) private readonly options: SessionOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    const { directUrl, preparedStatements = true, probe = false, idleSeconds } = this.options;
    const separate = directUrl !== undefined && directUrl !== (this.pooled.options as { url?: string }).url;
    if (separate) {
      this.direct = createDataSource({ url: directUrl, poolSize: DIRECT_SESSIONS, idleSeconds });
      await this.direct.initialize();
    }
    const direct = this.direct ?? this.pooled;
    registerSessions(this.pooled, {
      direct,
      sessionState: !separate,
      preparedStatements,
      ...(probe
        ? { probe: directUrlProbe(directClientConfig(direct)!, directUrl ? 'DATABASE_DIRECT_URL' : 'DATABASE_URL') }
        : {}),
    });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.direct?.destroy();
    this.direct = undefined;
  }
}

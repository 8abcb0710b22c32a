import pg from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver.js';
import { isTransactionPooled, PooledDirectUrlError } from './session-probe.js';

/** A direct URL found a session of its own is not probed again for this long. */
const PROBE_VALID_MS = 10_000;

/**
 * Where a data source's work that needs a session of its own goes, and what its pooled sessions
 * may hold. `direct` is the data source on DATABASE_DIRECT_URL (or the pooled one itself when that
 * is unset): session advisory locks, LISTEN, a lane's session settings. Through a `pooled` data
 * source whose sessions a transaction pooler shares, no session state: no startup settings, and
 * named prepared statements only when `preparedStatements`.
 */
export interface DatabaseSessions {
  direct: DataSource;
  /** false: DATABASE_URL may be a transaction pooler, so nothing is set on its sessions. */
  sessionState: boolean;
  preparedStatements: boolean;
  /** Probes the direct URL when `direct` opens a session; undefined: never (a test's own data source). */
  probe?: () => Promise<void>;
}

const registry = new WeakMap<DataSource, DatabaseSessions>();

/** Routes `pooled`'s sessions (DatabaseModule does, at start). */
export function registerSessions(pooled: DataSource, sessions: DatabaseSessions): void {
  registry.set(pooled, sessions);
}

/** `dataSource`'s routing; a data source nobody registered is its own direct one, with every session feature. */
export function sessionsOf(dataSource: DataSource): DatabaseSessions {
  return registry.get(dataSource) ?? { direct: dataSource, sessionState: true, preparedStatements: true };
}

/**
 * A connected query runner on a session of its own (DATABASE_DIRECT_URL), for session advisory
 * locks and session settings; whoever opens it releases it. On every new session the direct URL is
 * probed again (at most every 10 s): a direct URL that moved behind a transaction pooler throws
 * PooledDirectUrlError rather than hold a lock that would not be one.
 */
export async function openSession(dataSource: DataSource): Promise<QueryRunner> {
  const sessions = sessionsOf(dataSource);
  await sessions.probe?.();
  const runner = sessions.direct.createQueryRunner();
  await runner.connect();
  return runner;
}

/** The node-postgres settings of a client of its own on the direct URL (a LISTEN connection); undefined once it is closed. */
export function directClientConfig(dataSource: DataSource): pg.ClientConfig | undefined {
  const { direct } = sessionsOf(dataSource);
  return direct.isInitialized ? ((direct.driver as PostgresDriver).master as pg.Pool).options : undefined;
}

/** `query` as it may run on `dataSource`'s pooled sessions: without its name when prepared statements are off. */
export function statementFor<Q extends { name?: string }>(dataSource: DataSource, query: Q): Q {
  if (sessionsOf(dataSource).preparedStatements) return query;
  const { name: _name, ...unnamed } = query;
  return unnamed as Q;
}

/**
 * The probe of a direct URL (isTransactionPooled) as DatabaseSessions.probe: a pooled answer
 * throws PooledDirectUrlError naming `setting`; a direct one holds for PROBE_VALID_MS; concurrent
 * sessions opening share one probe.
 */
export function directUrlProbe(
  config: pg.ClientConfig,
  setting: 'DATABASE_URL' | 'DATABASE_DIRECT_URL',
): () => Promise<void> {
  let checkedAt = -Infinity;
  let running: Promise<void> | undefined;
  return () => {
    if (Date.now() - checkedAt < PROBE_VALID_MS) return Promise.resolve();
    running ??= isTransactionPooled(config)
      .then((pooled) => {
        if (pooled) throw new PooledDirectUrlError(setting);
        checkedAt = Date.now();
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };
}

import { Logger } from '@nestjs/common';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { createTestDatabase, TestDatabase } from '../../test/support/database.js';
import { eventually } from '../../test/support/eventually.js';
import { poolerBackends, pooledUrl } from '../../test/support/pooler.js';
import { AdvisoryLease } from './advisory-lease.js';
import { advisoryLocks } from './advisory-locks.js';
import { ChannelListener } from './channel-listener.js';
import { createDataSource } from './data-source.factory.js';
import { openSession } from './database-sessions.js';
import { DirectSessions } from './direct-sessions.service.js';
import { poolOfItsOwn, preparedQuery } from './postgres-connection.js';
import { isTransactionPooled, PooledDirectUrlError } from './session-probe.js';

/**
 * Issue 44: DATABASE_URL through PgBouncer in transaction mode (test/services.sh), the sessions on
 * DATABASE_DIRECT_URL. Each behaviour is shown failing on an unrouted data source through the
 * pooler first, so a pass means the routing did it.
 */
describe('sessions behind a transaction pooler (PgBouncer, pool_mode = transaction)', () => {
  let database: TestDatabase;
  let pooled: DataSource;
  let unrouted: DataSource;
  let sessions: DirectSessions;
  const opened: DataSource[] = [];

  const open = async (url: string) => {
    const dataSource = createDataSource({ url, poolSize: 3 });
    await dataSource.initialize();
    opened.push(dataSource);
    return dataSource;
  };

  /** A transaction of a client of its own through the pooler, open until `end` (it holds the backend it was given). */
  const holdTransaction = async () => {
    const client = new pg.Client({ connectionString: pooledUrl(database.url) });
    await client.connect();
    await client.query('BEGIN');
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    return { pid: rows[0].pid, end: () => client.end() };
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    pooled = await open(pooledUrl(database.url));
    unrouted = await open(pooledUrl(database.url));
    sessions = new DirectSessions(pooled, { directUrl: database.url, preparedStatements: false, probe: true });
    await sessions.onModuleInit();
  });

  afterAll(async () => {
    await sessions?.onApplicationShutdown();
    for (const dataSource of opened) await dataSource.destroy();
    await database?.drop();
  });

  it('the probe tells the pooler from PostgreSQL itself', async () => {
    expect(await isTransactionPooled({ connectionString: database.url })).toBe(false);
    expect(await isTransactionPooled({ connectionString: pooledUrl(database.url) })).toBe(true);
  });

  it('a lease holds its session advisory lock on a direct session, never on a pooler backend', async () => {
    const lock = advisoryLocks.single('projector');
    const lease = new AdvisoryLease(pooled, lock);
    const rival = new AdvisoryLease(pooled, lock);
    try {
      expect(await lease.tryAcquire()).toBe(true);
      expect(await rival.tryAcquire()).toBe(false);
      const holders = await pooled.query(
        `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND objsubid = 1 AND granted`,
        [lock[0]],
      );
      expect(holders).toHaveLength(1);
      const [{ pid }] = await lease.runner!.query('SELECT pg_backend_pid() AS pid');
      expect(holders[0].pid).toBe(pid);
      expect((await poolerBackends(database.name)).has(pid)).toBe(false);
    } finally {
      await rival.release();
      await lease.release();
    }
  });

  it('LISTEN goes to a direct session and hears a NOTIFY sent through the pooler', async () => {
    const listener = new ChannelListener(pooled, 'menu_sync_pooler_test', new Logger('test'));
    const heard: string[] = [];
    const unsubscribe = listener.subscribe((payload) => heard.push(payload));
    try {
      await eventually(async () => {
        await pooled.query(`SELECT pg_notify('menu_sync_pooler_test', 'hello')`);
        expect(heard).toContain('hello');
      }, 10_000);
      const listening = await pooled.query(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'menu-sync listen'`,
      );
      expect(listening).toHaveLength(1);
      expect((await poolerBackends(database.name)).has(listening[0].pid)).toBe(false);
    } finally {
      unsubscribe();
    }
  });

  it('named statements are left out on the pooled URL with DATABASE_PREPARED_STATEMENTS=off', async () => {
    // One client, two runs, and between them another client holding the backend of the first run.
    const twice = async (dataSource: DataSource) => {
      const pool = poolOfItsOwn(dataSource, { max: 1 });
      try {
        const first = await preparedQuery<{ n: number }>(dataSource, 'SELECT $1::int AS n', [1], pool);
        const held = await holdTransaction();
        try {
          const second = await preparedQuery<{ n: number }>(dataSource, 'SELECT $1::int AS n', [2], pool);
          return [...first, ...second].map((row) => row.n);
        } finally {
          await held.end();
        }
      } finally {
        await pool.end();
      }
    };
    await expect(twice(unrouted)).rejects.toThrow(/prepared statement "menu_sync_[0-9a-f]{20}" does not exist/);
    expect(await twice(pooled)).toEqual([1, 2]);
  });

  it('pools of their own carry no session settings through the pooler', async () => {
    const settings = { plan_cache_mode: 'force_generic_plan' };
    const bare = poolOfItsOwn(unrouted, { max: 1 }, settings);
    await expect(bare.query('SELECT 1')).rejects.toThrow(/unsupported startup parameter: options/);
    await bare.end();
    const own = poolOfItsOwn(pooled, { max: 1 }, settings);
    try {
      expect((await own.query('SHOW plan_cache_mode')).rows).toEqual([{ plan_cache_mode: 'auto' }]);
    } finally {
      await own.end();
    }
  });

  it('a session opened on a direct URL that is pooled is refused, naming DATABASE_DIRECT_URL', async () => {
    const misrouted = new DirectSessions(unrouted, { directUrl: pooledUrl(database.url), probe: true });
    const viaItself = await open(pooledUrl(database.url));
    const itself = new DirectSessions(viaItself, { probe: true });
    await misrouted.onModuleInit();
    await itself.onModuleInit();
    try {
      await expect(openSession(unrouted)).rejects.toThrow(PooledDirectUrlError);
      await expect(openSession(unrouted)).rejects.toThrow(
        /^DATABASE_DIRECT_URL goes through a transaction-mode pooler/,
      );
      await expect(openSession(viaItself)).rejects.toThrow(
        /^DATABASE_URL goes through a transaction-mode pooler .*: set DATABASE_DIRECT_URL to the database itself/,
      );
      const runner = await openSession(pooled);
      expect(await runner.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
      await runner.release();
    } finally {
      await misrouted.onApplicationShutdown();
    }
  });
});

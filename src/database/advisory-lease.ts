import type { DataSource, QueryRunner } from 'typeorm';
import { AdvisoryLock, lockQuery } from './advisory-locks.js';
import { openSession } from './database-sessions.js';

/**
 * A session advisory lock held on a dedicated connection: what makes one daemon the active
 * projector of a database, while the others stand by and take over when its session ends; held
 * shared, what makes a daemon one of the sink dispatchers. The connection is the lock's: it is
 * never returned to the pool holding it, and a session of its own (openSession: DATABASE_DIRECT_URL).
 */
export class AdvisoryLease {
  private held?: QueryRunner;

  constructor(
    private readonly dataSource: DataSource,
    private readonly lock: AdvisoryLock,
    /** Session settings for the connection, applied once when it opens. */
    private readonly prepare: (runner: QueryRunner) => Promise<void> = async () => undefined,
    private readonly mode: 'exclusive' | 'shared' = 'exclusive',
  ) {}

  /** The lease's connection (open once tryAcquire has run). */
  get runner(): QueryRunner | undefined {
    return this.held;
  }

  /** Opens the connection when needed and tries the lock: true when this session holds it. */
  async tryAcquire(): Promise<boolean> {
    if (!this.held) {
      this.held = await openSession(this.dataSource);
      await this.prepare(this.held);
    }
    return tryLock(this.held, this.lock, this.mode);
  }

  /** Unlocks and returns the connection, or destroys it when it cannot be unlocked. */
  async release(): Promise<void> {
    const runner = this.held;
    this.held = undefined;
    if (!runner) return;
    try {
      await runner.query('SELECT pg_advisory_unlock_all()');
      await runner.release();
    } catch (error) {
      const postgres = runner as unknown as { releasePostgresConnection(error: unknown): Promise<void> };
      await postgres.releasePostgresConnection(error).catch(() => undefined);
    }
  }
}

/** Tries the session advisory lock `lock` on `runner`'s session: true when that session holds it. */
export async function tryLock(
  runner: QueryRunner,
  lock: AdvisoryLock,
  mode: 'exclusive' | 'shared' = 'exclusive',
): Promise<boolean> {
  const fn = mode === 'shared' ? 'pg_try_advisory_lock_shared' : 'pg_try_advisory_lock';
  const [{ result }] = await runner.query(...lockQuery(fn, lock));
  return result;
}

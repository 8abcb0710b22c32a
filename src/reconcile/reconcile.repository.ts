import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { advisoryLocks, lockQuery } from '../database/advisory-locks.js';
import { openSession } from '../database/database-sessions.js';
import type { ReconcileRun, RunOutcome } from './reconcile-report.js';

const RECONCILE_LOCK = advisoryLocks.single('reconcile');
/** SQLSTATE of a lock wait past lock_timeout. */
const LOCK_NOT_AVAILABLE = '55P03';
/** How many of the newest log positions ownerSeenOn searches. */
const OWNER_SEARCH_WINDOW = 100_000;

/** Reconcile's own SQL: its run reports, its lock, and what the log tells about a connection. */
@Injectable()
export class ReconcileRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Runs `work` holding the reconcile lock, with how long it waited for it. When another run holds
   * the lock, waits up to `waitMs` for it (0: not at all), then returns undefined. The lock is a
   * session lock: when unlocking fails, the connection is destroyed, not pooled with it.
   */
  async exclusively<T>(work: (waitedMs: number) => Promise<T>, waitMs = 0): Promise<T | undefined> {
    const runner = await openSession(this.dataSource);
    let locked = false;
    try {
      [{ result: locked }] = await runner.query(...lockQuery('pg_try_advisory_lock', RECONCILE_LOCK));
      let waitedMs = 0;
      if (!locked && waitMs > 0) {
        const started = Date.now();
        // Held until known otherwise: the wait may fail after PostgreSQL granted the lock.
        locked = true;
        locked = await this.waitForLock(runner, waitMs);
        waitedMs = Date.now() - started;
      }
      if (!locked) return undefined;
      return await work(waitedMs);
    } finally {
      await this.release(runner, locked);
    }
  }

  /**
   * Runs `work` holding the reconcile lock shared, as the batches of the spread schedule do in
   * every process at once; undefined without running it while a run holds the lock (or waits for it).
   */
  async alongside<T>(work: () => Promise<T>): Promise<T | undefined> {
    const runner = await openSession(this.dataSource);
    let locked = false;
    try {
      [{ result: locked }] = await runner.query(...lockQuery('pg_try_advisory_lock_shared', RECONCILE_LOCK));
      if (!locked) return undefined;
      return await work();
    } finally {
      try {
        if (locked) await runner.query('SELECT pg_advisory_unlock_all()');
        await runner.release();
      } catch (error) {
        const postgres = runner as unknown as { releasePostgresConnection(error: unknown): Promise<void> };
        await postgres.releasePostgresConnection(error).catch(() => undefined);
      }
    }
  }

  /** Waits in PostgreSQL's queue for the lock, so that runs waiting together take their turns in order. */
  private async waitForLock(runner: QueryRunner, waitMs: number): Promise<boolean> {
    await runner.startTransaction();
    try {
      await runner.query(`SELECT set_config('lock_timeout', $1, true)`, [`${Math.ceil(waitMs)}ms`]);
      await runner.query(...lockQuery('pg_advisory_lock', RECONCILE_LOCK));
      await runner.commitTransaction();
      return true;
    } catch (error) {
      await runner.rollbackTransaction();
      if ((error as { driverError?: { code?: string } }).driverError?.code === LOCK_NOT_AVAILABLE) return false;
      throw error;
    }
  }

  private async release(runner: QueryRunner, locked: boolean): Promise<void> {
    try {
      if (locked) await runner.query(...lockQuery('pg_advisory_unlock', RECONCILE_LOCK));
      await runner.release();
    } catch (error) {
      const postgres = runner as unknown as { releasePostgresConnection(error: unknown): Promise<void> };
      await postgres.releasePostgresConnection(error).catch(() => undefined);
    }
  }

  /**
   * The resource owner of the newest event delivered through one of the connection's webhook keys,
   * among the newest 100,000 log entries: key_id has no index, and without a delivery on the key
   * the search would otherwise read the whole log at every run. An owner seen once is stored on the
   * connection, so the bound only matters until then.
   */
  async ownerSeenOn(connectionId: number): Promise<string | null> {
    const [row] = await this.dataSource.query(
      `SELECT e.owner_id FROM event_log e
        WHERE e.key_id = ANY (SELECT 'key:' || s.webhook_key_id FROM subscriptions s WHERE s.connection_id = $1 AND s.webhook_key_id IS NOT NULL)
          AND e.owner_id IS NOT NULL
          AND e.position > (SELECT coalesce(max(position), 0) - $2 FROM event_log)
        ORDER BY e.position DESC LIMIT 1`,
      [connectionId, OWNER_SEARCH_WINDOW],
    );
    return row?.owner_id ?? null;
  }

  async saveRun(run: Omit<ReconcileRun, 'id'>): Promise<ReconcileRun> {
    const [row] = await this.dataSource.query(
      `INSERT INTO reconcile_runs (trigger, started_at, finished_at, outcome, report) VALUES ($1, $2, $3, $4, $5) RETURNING id::int AS id`,
      [
        run.trigger,
        run.started_at,
        run.finished_at,
        run.outcome,
        JSON.stringify({ stores: run.stores, errors: run.errors, notes: run.notes }),
      ],
    );
    return { id: row.id, ...run };
  }

  /** Newest first. */
  async listRuns(limit: number): Promise<ReconcileRun[]> {
    const rows: Array<{
      id: number;
      trigger: string;
      started_at: Date;
      finished_at: Date;
      outcome: RunOutcome;
      report: Pick<ReconcileRun, 'stores' | 'errors' | 'notes'>;
    }> = await this.dataSource.query(
      `SELECT id::int AS id, trigger, started_at, finished_at, outcome, report FROM reconcile_runs ORDER BY id DESC LIMIT $1`,
      [limit],
    );
    return rows.map((row) => ({
      id: row.id,
      trigger: row.trigger,
      started_at: row.started_at.toISOString(),
      finished_at: row.finished_at.toISOString(),
      outcome: row.outcome,
      stores: row.report.stores,
      errors: row.report.errors,
      notes: row.report.notes ?? [],
    }));
  }
}

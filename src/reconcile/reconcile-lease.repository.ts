import { Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { advisoryLocks, AdvisoryLock, lockQuery, LOCK_SPACES, pgLocksMatch } from '../database/advisory-locks.js';
import type { LeaseView } from '../sinks/dispatch/sink-shares.js';

/** Held shared by every process working the spread schedule: its holders are those alive. */
export const RECONCILE_WORKER_LOCK = advisoryLocks.single('reconcileWorker');

const bucketLock = (key: number): AdvisoryLock => advisoryLocks.inSpace('reconcileBucket', key);

/**
 * The leases of reconcile's store buckets, as the sink dispatchers hold theirs: session advisory
 * locks all taken on the connection that holds RECONCILE_WORKER_LOCK, so that a process that dies
 * loses every lease at once with its session.
 */
@Injectable()
export class ReconcileLeaseRepository {
  /** A client that vanished (its host down, the network cut) is found dead within seconds, and its leases freed. */
  async prepare(runner: QueryRunner): Promise<void> {
    await runner.query(
      `SELECT set_config('tcp_keepalives_idle', '2', false), set_config('tcp_keepalives_interval', '1', false),
              set_config('tcp_keepalives_count', '2', false)`,
    );
  }

  /** The processes alive and who holds each bucket, from pg_locks (this database only). */
  async view(runner: QueryRunner): Promise<LeaseView> {
    const [member, params] = pgLocksMatch(RECONCILE_WORKER_LOCK);
    const [row] = (await runner.query(
      `SELECT pg_backend_pid() AS self,
              (SELECT count(DISTINCT l.pid) FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.database = d.oid AND l.granted AND ${member})::int AS workers,
              (SELECT coalesce(json_agg(json_build_array(l.objid::bigint, l.pid)), '[]') FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.database = d.oid AND l.granted
                  AND l.classid = $${params.length + 1} AND l.objsubid = 2) AS holders
         FROM pg_database d WHERE d.datname = current_database()`,
      [...params, LOCK_SPACES.reconcileBucket],
    )) as Array<{ self: number; workers: number; holders: Array<[number, number]> }>;
    return {
      self: row.self,
      dispatchers: row.workers,
      holders: new Map(row.holders.map(([objid, pid]) => [Number(objid), pid])),
      olderDispatchers: 0,
    };
  }

  /** Takes a free bucket; false when another process holds it. */
  async tryTake(runner: QueryRunner, key: number): Promise<boolean> {
    const [{ result }] = await runner.query(...lockQuery('pg_try_advisory_lock', bucketLock(key)));
    return result;
  }

  async release(runner: QueryRunner, key: number): Promise<void> {
    await runner.query(...lockQuery('pg_advisory_unlock', bucketLock(key)));
  }
}

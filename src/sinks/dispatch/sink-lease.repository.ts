import { Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { advisoryLocks, AdvisoryLock, lockQuery, LOCK_SPACES, pgLocksMatch } from '../../database/advisory-locks.js';
import type { LeaseView } from './sink-shares.js';

/** Held shared by every sink dispatcher: its holders are the dispatchers alive (docs/design.md, Sinks). */
export const SINK_DISPATCHER_LOCK = advisoryLocks.single('sinkDispatcher');

const leaseLock = (key: number): AdvisoryLock => advisoryLocks.inSpace('sinkBucket', key);

/**
 * The sink leases: a session advisory lock per bucket of sinks (SINK_BUCKETS in all, whatever the
 * number of sinks), all taken on the dispatcher's own connection (the one holding
 * SINK_DISPATCHER_LOCK), so that they end with its session: when its process dies, PostgreSQL
 * frees every lease it held at once.
 */
@Injectable()
export class SinkLeaseRepository {
  /**
   * Session settings of the dispatcher's connection: a client that vanished without closing it
   * (its host down, the network cut) is found dead within seconds, not after the system's two
   * hours of keepalive idleness, and its leases freed.
   */
  async prepare(runner: QueryRunner): Promise<void> {
    await runner.query(
      `SELECT set_config('tcp_keepalives_idle', '2', false), set_config('tcp_keepalives_interval', '1', false),
              set_config('tcp_keepalives_count', '2', false)`,
    );
  }

  /**
   * The dispatchers alive and who holds each bucket, from pg_locks (this database only), and
   * whether a dispatcher of an older version holds per-sink leases.
   */
  async view(runner: QueryRunner): Promise<LeaseView> {
    const [member, params] = pgLocksMatch(SINK_DISPATCHER_LOCK);
    const [row] = (await runner.query(
      `SELECT pg_backend_pid() AS self,
              (SELECT count(DISTINCT l.pid) FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.database = d.oid AND l.granted AND ${member})::int AS dispatchers,
              (SELECT coalesce(json_agg(json_build_array(l.objid::bigint, l.pid)), '[]') FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.database = d.oid AND l.granted
                  AND l.classid = $${params.length + 1} AND l.objsubid = 2) AS holders,
              (SELECT count(DISTINCT l.pid) FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.database = d.oid AND l.granted
                  AND l.classid = $${params.length + 2} AND l.objsubid = 2)::int AS older
         FROM pg_database d WHERE d.datname = current_database()`,
      [...params, LOCK_SPACES.sinkBucket, LOCK_SPACES.sinkLease],
    )) as Array<{ self: number; dispatchers: number; holders: Array<[number, number]>; older: number }>;
    return {
      self: row.self,
      dispatchers: row.dispatchers,
      holders: new Map(row.holders.map(([objid, pid]) => [Number(objid), pid])),
      olderDispatchers: row.older,
    };
  }

  /** Takes a free lease; false when another dispatcher holds it. */
  async tryTake(runner: QueryRunner, key: number): Promise<boolean> {
    const [{ result }] = await runner.query(...lockQuery('pg_try_advisory_lock', leaseLock(key)));
    return result;
  }

  async release(runner: QueryRunner, key: number): Promise<void> {
    await runner.query(...lockQuery('pg_advisory_unlock', leaseLock(key)));
  }
}

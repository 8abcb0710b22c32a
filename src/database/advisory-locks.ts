/**
 * Every PostgreSQL advisory lock menu-sync takes, in one registry, so no two can ever share a key
 * (a replay once blocked token refreshes because both used 7_260_200). Advisory locks are scoped
 * to the current database. A lock is one bigint key, or a (space, key) pair of int4s; PostgreSQL
 * keeps the two forms apart (`objsubid` 1 and 2 in `pg_locks`), and this registry keeps every
 * number distinct across both anyway.
 */
export type AdvisoryLock = readonly [key: number] | readonly [space: number, key: number];

/** Locks of one key: singletons per database. */
export const SINGLE_LOCKS = {
  /** Two daemons starting together migrate one after the other. */
  migrations: 7_260_001,
  /** The one active projector of the database; a standby waits for it. */
  projector: 7_260_002,
  /** One reconcile run at a time. */
  reconcile: 7_260_003,
  /**
   * Held shared by every sink dispatcher of the database: the holders are the dispatchers alive,
   * among which the sinks are shared (a daemon of before shared leases held it exclusively).
   */
  sinkDispatcher: 7_260_004,
  /**
   * Held by every transaction that writes the change log, from before it has a transaction id
   * until it commits: the writers' transaction ids are then in commit order, which makes a
   * change-log position read in one snapshot an exact cursor (ChangeLogRepository.positionInSnapshot).
   */
  changeLogWriter: 7_260_005,
  /** One change-log compaction at a time. */
  changeLogCompaction: 7_260_006,
  /** One connect at a time, from its owner's lookup to its stored tokens: an owner is never connected twice. */
  connect: 7_260_007,
  /**
   * Held shared by every process of the reconcile role working the spread schedule: the holders
   * are those alive, among which the store buckets are shared.
   */
  reconcileWorker: 7_260_008,
  /** One archive run (`menu-sync archive`, ARCHIVE_AFTER, a restore) at a time. */
  archive: 7_260_009,
} as const;

/** First keys of two-key locks; the second key names the instance (a projection, a connection). */
export const LOCK_SPACES = {
  /** Taken by each projector page and by a rebuild's swap, per projection. */
  projectionPage: 7_260_100,
  /** Serialises a connection's token refreshes across processes, per connection id. */
  connectionRefresh: 7_260_200,
  /** One rebuild (replay or verify) of a projection at a time. */
  rebuild: 7_260_300,
  /**
   * The lease of one sink, by a hash of its id, as daemons before sink buckets took it: only
   * looked for, so that a dispatcher of either version never delivers a sink the other holds.
   */
  sinkLease: 7_260_400,
  /**
   * The lease of a bucket of sinks (sinkLeaseKey: 0 … SINK_BUCKETS - 1), held by the dispatcher
   * delivering every sink of that bucket.
   */
  sinkBucket: 7_260_600,
  /** Held by the session of the active projector that applies a projection (its lane), per projection. */
  projectorLane: 7_260_500,
  /** The lease of a bucket of reconcile's stores (0 … RECONCILE_BUCKETS - 1), held by the process reconciling them. */
  reconcileBucket: 7_260_700,
} as const;

export const advisoryLocks = {
  single: (name: keyof typeof SINGLE_LOCKS): AdvisoryLock => [SINGLE_LOCKS[name]],
  inSpace: (space: keyof typeof LOCK_SPACES, key: number): AdvisoryLock => [LOCK_SPACES[space], key],
};

type LockFunction =
  | 'pg_advisory_lock'
  | 'pg_try_advisory_lock'
  | 'pg_try_advisory_lock_shared'
  | 'pg_advisory_unlock'
  | 'pg_advisory_xact_lock'
  | 'pg_try_advisory_xact_lock';

/**
 * The statement and parameters that call `fn` on `lock`, answering one row whose `result` column
 * holds the function's value: `runner.query(...lockQuery('pg_try_advisory_lock', lock))`.
 */
export function lockQuery(fn: LockFunction, lock: AdvisoryLock): [string, number[]] {
  const args = lock.length === 1 ? '$1::bigint' : '$1::int, $2::int';
  return [`SELECT ${fn}(${args}) AS result`, [...lock]];
}

/** The same call as one literal statement, for a batch of statements sent in one round trip (see queryBatch). */
export function lockStatement(fn: LockFunction, lock: AdvisoryLock): string {
  if (!lock.every(Number.isSafeInteger)) throw new Error(`not an advisory lock: ${lock.join(', ')}`);
  const args = lock.length === 1 ? `${lock[0]}::bigint` : `${lock[0]}::int, ${lock[1]}::int`;
  return `SELECT ${fn}(${args}) AS result`;
}

/** SQL condition on `pg_locks` (aliased `l`) matching `lock`; its parameters start at `$first`. */
export function pgLocksMatch(lock: AdvisoryLock, first = 1): [string, number[]] {
  if (lock.length === 1) return [`l.classid = 0 AND l.objid = $${first} AND l.objsubid = 1`, [lock[0]]];
  return [`l.classid = $${first} AND l.objid = $${first + 1} AND l.objsubid = 2`, [lock[0], lock[1]]];
}

import { createHash } from 'node:crypto';

/**
 * How many leases the sinks are shared in: a dispatcher holds at most this many advisory locks
 * whatever the number of sinks, so PostgreSQL's lock table (shared by the whole cluster) stays
 * usable with tens of thousands of sinks.
 */
export const SINK_BUCKETS = 1024;

/** The lease of a sink (LOCK_SPACES.sinkBucket): its bucket, the SHA-256 of its id modulo SINK_BUCKETS. */
export function sinkLeaseKey(sinkId: string): number {
  return createHash('sha256').update(sinkId).digest().readUInt32BE(0) % SINK_BUCKETS;
}

/** Who delivers what, as the database shows it. */
export interface LeaseView {
  /** The sink dispatchers alive on the database, this one included. */
  dispatchers: number;
  /** Each sink lease held, by the session (backend pid) holding it. */
  holders: ReadonlyMap<number, number>;
  /** This dispatcher's session. */
  self: number;
  /** Sessions holding a lease of a version before buckets (one lock per sink): while any does, nobody takes a bucket. */
  olderDispatchers: number;
}

export interface SharePlan {
  /** The most leases this dispatcher holds: ceil(leases / dispatchers). */
  share: number;
  /** Held leases to give up: those of sinks gone, and any above the share. */
  release: number[];
  /** Free leases to try, in this dispatcher's order, until it holds its share. */
  candidates: number[];
  /** How many more leases this dispatcher may take. */
  room: number;
}

/**
 * A stable order of the leases that differs between dispatchers (a hash of the lease key and the
 * session), so that dispatchers taking over together mostly try different leases first.
 */
const rank = (self: number) => (key: number) => {
  let h = Math.imul(key ^ Math.imul(self, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
};

/**
 * This dispatcher's part of the sinks: no dispatcher holds more than ceil(leases / dispatchers),
 * so the leases of a dispatcher that died (more room for the others) or the room a dispatcher
 * that joined needs (less for the others) shift until the shares are even. `held` is what this
 * dispatcher holds and still delivers (not what it is giving up).
 */
export function planShare(leases: readonly number[], held: ReadonlySet<number>, view: LeaseView): SharePlan {
  const wanted = new Set(view.olderDispatchers > 0 ? [] : leases);
  const share = Math.ceil(wanted.size / Math.max(1, view.dispatchers));
  const order = rank(view.self);
  const byRank = (a: number, b: number) => order(a) - order(b);
  const gone = [...held].filter((key) => !wanted.has(key));
  const mine = [...wanted].filter((key) => held.has(key)).sort(byRank);
  if (mine.length >= share) return { share, release: [...gone, ...mine.slice(share)], candidates: [], room: 0 };
  const free = [...wanted].filter((key) => !view.holders.has(key)).sort(byRank);
  return { share, release: gone, candidates: free, room: share - mine.length };
}

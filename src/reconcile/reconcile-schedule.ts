import { createHash } from 'node:crypto';

/**
 * The spread schedule of reconcile (docs/reference.md §13), as pure functions: no clock, no
 * randomness of their own (both are passed in), no database.
 *
 * Each store holds a slot, a fraction of RECONCILE_INTERVAL: its turn comes when the time, modulo
 * the interval, passes its slot, so stores whose slots are spread evenly are reconciled evenly
 * over the interval, once each per interval, however often the daemon restarts. A turn is moved by
 * a jitter of up to JITTER of the interval either way, never accumulated (the slot stays).
 */

/** How many leases the stores are shared in among the processes with the `reconcile` role. */
export const RECONCILE_BUCKETS = 64;

/** The turn of a store moves by up to this share of the interval, earlier or later. */
export const JITTER = 0.05;

/** A failing store is tried again after this, doubled at each failure in a row … */
export const RETRY_BASE_MS = 30_000;
/** … up to this (or the interval, when shorter). */
export const RETRY_CAP_MS = 3_600_000;

/** Why a store goes before the spread: its connection was just made or subscribed again, went silent, or the daemon was down. */
export type PriorityReason = 'connection' | 'subscription' | 'silence' | 'downtime';

/** The lease bucket of a store (0 … RECONCILE_BUCKETS - 1): a hash of its connection and id. */
export function storeBucket(connectionId: number, storeId: string): number {
  return createHash('sha256').update(`${connectionId}/${storeId}`).digest().readUInt32BE(0) % RECONCILE_BUCKETS;
}

/** Where `at` is in its interval, as a fraction in [0, 1). */
export function phaseOf(at: number, intervalMs: number): number {
  return (((at % intervalMs) + intervalMs) % intervalMs) / intervalMs;
}

/**
 * Slots for `count` new stores among the `taken` ones: each gap between taken slots (on the circle
 * of the interval) receives new stores in proportion to its length, evenly inside it; with none
 * taken, the new ones are evenly spaced from `phase` on. Returned in the order their turns come
 * after `phase`, so the caller gives the first to the oldest store.
 */
export function placeSlots(taken: readonly number[], count: number, phase: number): number[] {
  if (count <= 0) return [];
  let slots: number[];
  if (taken.length === 0) {
    slots = Array.from({ length: count }, (_, k) => (phase + k / count) % 1);
  } else {
    const sorted = [...taken].sort((a, b) => a - b);
    const gaps = sorted.map((start, i) => ({
      start,
      length: i + 1 < sorted.length ? sorted[i + 1] - start : 1 - start + sorted[0],
      share: 0,
    }));
    // Largest remainder: each gap's share of `count` in proportion to its length.
    const exact = gaps.map((gap) => gap.length * count);
    gaps.forEach((gap, i) => (gap.share = Math.floor(exact[i])));
    let left = count - gaps.reduce((sum, gap) => sum + gap.share, 0);
    const byRemainder = gaps.map((_, i) => i).sort((a, b) => exact[b] - gaps[b].share - (exact[a] - gaps[a].share));
    for (const i of byRemainder) {
      if (left-- <= 0) break;
      gaps[i].share++;
    }
    slots = gaps.flatMap((gap) =>
      Array.from({ length: gap.share }, (_, k) => (gap.start + (gap.length * (k + 1)) / (gap.share + 1)) % 1),
    );
  }
  const wait = (slot: number) => (slot - phase + 1) % 1;
  return slots.sort((a, b) => wait(a) - wait(b));
}

/** The first turn of `slot` at or after `after` (ms since the epoch). */
export function turnAt(slot: number, after: number, intervalMs: number): number {
  const start = after - phaseOf(after, intervalMs) * intervalMs;
  const turn = start + slot * intervalMs;
  return turn >= after ? turn : turn + intervalMs;
}

/**
 * When a store reconciled at `at` is due again: the first turn of its slot at least half an
 * interval later (a store reconciled early, by a priority, is not reconciled again at once), moved
 * by the jitter; `random` is in [0, 1).
 */
export function nextDueAfterSuccess(slot: number, at: number, intervalMs: number, random: number): number {
  const jitter = (random * 2 - 1) * JITTER * intervalMs;
  return Math.max(at + intervalMs / 2, turnAt(slot, at + intervalMs / 2, intervalMs) + jitter);
}

/** When a store that failed `failures` times in a row (1 for the first) is tried again: half to all of the doubled base. */
export function nextDueAfterFailure(failures: number, at: number, intervalMs: number, random: number): number {
  const ceiling = Math.min(RETRY_BASE_MS * 2 ** Math.min(failures - 1, 20), RETRY_CAP_MS, intervalMs);
  return at + ceiling / 2 + (random * ceiling) / 2;
}

/** A store as the schedule orders it. */
export interface DueStore {
  priority: string | null;
  nextDueAt: number;
  lastReconciledAt: number | null;
}

/** Priorities first, then the longest due, then the longest unreconciled (never first). */
export function dueOrder(a: DueStore, b: DueStore): number {
  return (
    Number(a.priority === null) - Number(b.priority === null) ||
    a.nextDueAt - b.nextDueAt ||
    (a.lastReconciledAt ?? -Infinity) - (b.lastReconciledAt ?? -Infinity)
  );
}

/** What the schedule knows of a connection, to tell whether its stores go first. */
export interface ConnectionFacts {
  createdAt: number;
  /** When its newest registered webhook subscription was made (null: none). */
  subscribedAt: number | null;
  /** The newest webhook delivery for its owner (null: none yet). */
  lastDeliveryAt: number | null;
}

export interface PriorityThresholds {
  intervalMs: number;
  silenceMs: number;
}

/** A store already scheduled, as priorityOf sees it. */
export interface KnownStore {
  createdAt: number;
  lastReconciledAt: number | null;
  priority: string | null;
}

/**
 * Whether a store already scheduled goes first, and why (null: it keeps its turn). Subscribed
 * again: a subscription made after its last reconcile (or after it was scheduled). Silent: no
 * delivery for its owner for `silenceMs` (counted from the connection's making when none came)
 * while another owner's came within `silenceMs` (`newestDeliveryAt`), and not reconciled since it
 * went silent.
 */
export function priorityOf(
  store: KnownStore,
  connection: ConnectionFacts,
  newestDeliveryAt: number | null,
  now: number,
  thresholds: PriorityThresholds,
): PriorityReason | null {
  if (store.priority !== null) return null;
  const since = store.lastReconciledAt ?? store.createdAt;
  if (connection.subscribedAt !== null && connection.subscribedAt > since) return 'subscription';
  const heard = Math.max(connection.lastDeliveryAt ?? -Infinity, connection.createdAt);
  const silentSince = heard + thresholds.silenceMs;
  const othersArrive = newestDeliveryAt !== null && now - newestDeliveryAt < thresholds.silenceMs;
  if (now >= silentSince && othersArrive && (store.lastReconciledAt ?? -Infinity) < silentSince) return 'silence';
  return null;
}

/** Whether a connection seen for the first time was just made: its stores go first instead of taking slots. */
export function justMade(connection: ConnectionFacts, now: number, thresholds: PriorityThresholds): boolean {
  return now - connection.createdAt < thresholds.intervalMs;
}

/** Every reconcile process was stopped for longer than `downtimeMs`: every store goes first. */
export function wasDown(previousAliveAt: number | null, now: number, downtimeMs: number): boolean {
  return previousAliveAt !== null && now - previousAliveAt > downtimeMs;
}

import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { StatusRepository } from '../observability/status.repository.js';
import type { ReconcileProgressRow } from '../observability/status.repository.js';

/** A row of `reconcile_stores` (times in ms since the epoch). */
export interface ScheduledStore {
  connectionId: number;
  storeId: string;
  slot: number;
  priority: string | null;
  nextDueAt: number;
  lastReconciledAt: number | null;
  consecutiveFailures: number;
  createdAt: number;
}

/** A store to add to the schedule. */
export interface NewScheduledStore {
  connectionId: number;
  storeId: string;
  bucket: number;
  slot: number;
  nextDueAt: number;
  priority: string | null;
}

/** What one reconcile of a store ended with, and when it is due again. */
export interface StoreOutcome {
  connectionId: number;
  storeId: string;
  /** null: reconciled; else the error that stopped it. */
  error: string | null;
  /** Whether the connection's owner has the store (false: it answered 403/404). */
  owned: boolean;
  at: number;
  nextDueAt: number;
}

/** A due store, with what its batch needs of its connection. */
export interface DueRow {
  connectionId: number;
  storeId: string;
  bucket: number;
  priority: string | null;
  /** Whether the connection's owner has it, as far as known (it has not answered 403/404). */
  owned: boolean;
  /** The stores the connection's owner has, as far as known (its owned rows). */
  ownedStores: number;
}

const ROW_CHUNK = 5000;
const chunksOf = <T>(items: T[]): T[][] =>
  Array.from({ length: Math.ceil(items.length / ROW_CHUNK) }, (_, i) =>
    items.slice(i * ROW_CHUNK, (i + 1) * ROW_CHUNK),
  );
const ms = (value: Date | null) => (value === null ? null : value.getTime());

/** Reconcile's schedule per store (migration 1766600000000): its rows, the due ones, outcomes, the heartbeat. */
@Injectable()
export class ReconcileStoresRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** The scheduled stores of some connections (all when undefined). */
  async stores(connectionIds?: number[]): Promise<ScheduledStore[]> {
    const rows: Array<Record<string, unknown>> = await this.dataSource.query(
      `SELECT connection_id::int AS connection_id, store_id, slot, priority, next_due_at, last_reconciled_at,
              consecutive_failures, created_at
         FROM reconcile_stores WHERE $1::bigint[] IS NULL OR connection_id = ANY ($1::bigint[])`,
      [connectionIds ?? null],
    );
    return rows.map((row) => ({
      connectionId: row.connection_id as number,
      storeId: row.store_id as string,
      slot: row.slot as number,
      priority: row.priority as string | null,
      nextDueAt: (row.next_due_at as Date).getTime(),
      lastReconciledAt: ms(row.last_reconciled_at as Date | null),
      consecutiveFailures: row.consecutive_failures as number,
      createdAt: (row.created_at as Date).getTime(),
    }));
  }

  /** Every slot taken: where new stores go. */
  async slots(): Promise<number[]> {
    const rows: Array<{ slot: number }> = await this.dataSource.query(`SELECT slot FROM reconcile_stores`);
    return rows.map((row) => row.slot);
  }

  /** Adds stores not yet scheduled (one already there is left as it is). */
  async add(stores: NewScheduledStore[]): Promise<void> {
    for (const chunk of chunksOf(stores))
      await this.dataSource.query(
        `INSERT INTO reconcile_stores (connection_id, store_id, bucket, slot, next_due_at, priority)
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::float8[], $5::timestamptz[], $6::text[])
         ON CONFLICT (connection_id, store_id) DO NOTHING`,
        [
          chunk.map((store) => store.connectionId),
          chunk.map((store) => store.storeId),
          chunk.map((store) => store.bucket),
          chunk.map((store) => store.slot),
          chunk.map((store) => new Date(store.nextDueAt)),
          chunk.map((store) => store.priority),
        ],
      );
  }

  /** Makes stores go first, due now, for `reason`; one that already has a priority keeps its own. */
  async prioritize(connectionId: number, storeIds: string[], reason: string): Promise<void> {
    await this.dataSource.query(
      `UPDATE reconcile_stores SET priority = coalesce(priority, $3), next_due_at = least(next_due_at, now())
        WHERE connection_id = $1 AND store_id = ANY ($2::text[])`,
      [connectionId, storeIds, reason],
    );
  }

  /** Every store last reconciled before `before` (or never) goes first. */
  async prioritizeAll(reason: string, before: Date): Promise<number> {
    const [, count] = await this.dataSource.query(
      `UPDATE reconcile_stores SET priority = coalesce(priority, $1), next_due_at = least(next_due_at, now())
        WHERE coalesce(last_reconciled_at, '-infinity') < $2`,
      [reason, before],
    );
    return Number(count);
  }

  /** The due stores of active connections in `buckets`, in the schedule's order (dueOrder), at most `limit`. */
  async due(buckets: number[], limit: number): Promise<DueRow[]> {
    if (buckets.length === 0) return [];
    const rows: Array<Record<string, unknown>> = await this.dataSource.query(
      `SELECT s.connection_id::int AS connection_id, s.store_id, s.bucket, s.priority, s.owned,
              (SELECT count(*) FROM reconcile_stores o WHERE o.connection_id = s.connection_id AND o.owned)::int AS owned_stores
         FROM reconcile_stores s JOIN connections c ON c.id = s.connection_id AND c.state = 'active'
        WHERE s.bucket = ANY ($1::int[]) AND s.next_due_at <= now()
        ORDER BY s.priority IS NULL, s.next_due_at, s.last_reconciled_at NULLS FIRST, s.connection_id, s.store_id
        LIMIT $2`,
      [buckets, limit],
    );
    return rows.map((row) => ({
      connectionId: row.connection_id as number,
      storeId: row.store_id as string,
      bucket: row.bucket as number,
      priority: row.priority as string | null,
      owned: row.owned as boolean,
      ownedStores: row.owned_stores as number,
    }));
  }

  /** When the soonest store of `buckets` is due (null: none is scheduled). */
  async soonestDue(buckets: number[]): Promise<number | null> {
    if (buckets.length === 0) return null;
    const [row] = await this.dataSource.query(
      `SELECT min(s.next_due_at) AS at FROM reconcile_stores s JOIN connections c ON c.id = s.connection_id AND c.state = 'active'
        WHERE s.bucket = ANY ($1::int[])`,
      [buckets],
    );
    return ms(row.at);
  }

  /** Records outcomes: a success clears the priority and the failures; a failure counts and keeps the priority. */
  async record(outcomes: StoreOutcome[]): Promise<void> {
    for (const chunk of chunksOf(outcomes))
      await this.dataSource.query(
        `UPDATE reconcile_stores s SET
            last_attempt_at = o.at,
            next_due_at = o.next_due_at,
            owned = o.owned,
            last_reconciled_at = CASE WHEN o.error IS NULL THEN o.at ELSE s.last_reconciled_at END,
            priority = CASE WHEN o.error IS NULL THEN NULL ELSE s.priority END,
            consecutive_failures = CASE WHEN o.error IS NULL THEN 0 ELSE s.consecutive_failures + 1 END,
            last_error = o.error
           FROM unnest($1::bigint[], $2::text[], $3::text[], $4::boolean[], $5::timestamptz[], $6::timestamptz[])
             AS o (connection_id, store_id, error, owned, at, next_due_at)
          WHERE s.connection_id = o.connection_id AND s.store_id = o.store_id`,
        [
          chunk.map((outcome) => outcome.connectionId),
          chunk.map((outcome) => outcome.storeId),
          chunk.map((outcome) => outcome.error),
          chunk.map((outcome) => outcome.owned),
          chunk.map((outcome) => new Date(outcome.at)),
          chunk.map((outcome) => new Date(outcome.nextDueAt)),
        ],
      );
  }

  /** Stores done, pending and failing, and the next due: the status report's reading (StatusRepository). */
  async progress(): Promise<ReconcileProgressRow> {
    const progress = await new StatusRepository(this.dataSource, []).reconcileProgress();
    return progress ?? { storesDone: 0, storesPending: 0, storesFailing: 0, nextDueAt: null };
  }

  /**
   * A reconcile process is alive: returns when one last said so before (null: never). Not FOR
   * UPDATE: a locked row the statement itself updates reads as none. Two processes starting
   * together may both see the old time, and both put every store first: the same writes.
   */
  async heartbeat(): Promise<number | null> {
    const [row] = await this.dataSource.query(
      `WITH old AS (SELECT alive_at FROM reconcile_schedule WHERE id = 1)
       INSERT INTO reconcile_schedule (id, alive_at) VALUES (1, now())
       ON CONFLICT (id) DO UPDATE SET alive_at = excluded.alive_at
       RETURNING (SELECT alive_at FROM old) AS before`,
    );
    return ms(row.before);
  }

  /** The newest webhook delivery for `owner` (null: none), and the newest of any owner. */
  async deliveries(owner: string): Promise<{ owner: number | null; newest: number | null }> {
    const [row] = await this.dataSource.query(
      `SELECT (SELECT received_at FROM event_log WHERE owner_id = $1 AND source = 'webhook' ORDER BY position DESC LIMIT 1) AS owner,
              (SELECT received_at FROM event_log WHERE source = 'webhook' ORDER BY position DESC LIMIT 1) AS newest`,
      [owner],
    );
    return { owner: ms(row.owner), newest: ms(row.newest) };
  }

  /** When the connection's newest registered webhook subscription was made (null: none). */
  async subscribedAt(connectionId: number): Promise<number | null> {
    const [row] = await this.dataSource.query(
      `SELECT max(created_at) AS at FROM subscriptions WHERE connection_id = $1 AND status = 'registered'`,
      [connectionId],
    );
    return ms(row.at);
  }
}

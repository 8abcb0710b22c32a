/** What status.repository.ts needs of a database: rows for a statement (TypeORM's DataSource, or a pg pool wrapped). */
export interface SqlReader {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- rows as pg gives them, typed by the caller
  query(sql: string, parameters?: unknown[]): Promise<any[]>;
}

export interface ConnectionStatusRow {
  id: number;
  state: string;
  ownerId: string | null;
  sandbox: boolean;
  expiresAt: Date;
  lastError: string | null;
  subscriptions: number;
  /** The newest webhook subscription: the one the platform posts to. */
  newestSubscription: { id: number; status: string; lastError: string | null } | null;
}

export interface ProjectionStatusRow {
  name: string;
  position: number;
  head: number;
  lag: number;
  parked: number;
  lastError: string | null;
  /** When the oldest entry the projection has not applied was received (null: none waits). */
  waitingSince: Date | null;
  checkpointMovedAt: Date;
}

export interface SinkAttentionRow {
  id: string;
  kind: string;
  state: string;
  failingSince: Date | null;
  lastSuccessAt: Date | null;
  lastError: string | null;
}

export interface SinkStatusCounts {
  total: number;
  byState: Record<string, number>;
  attention: number;
  needingAttention: SinkAttentionRow[];
}

export interface ReconcileStatusRow {
  id: number;
  trigger: string;
  outcome: string;
  startedAt: string;
  errors: string[];
}

/**
 * Where reconcile's per-store schedule stands (docs/reference.md §13), over the stores of active
 * connections that their owners have: done (reconciled, not due yet), pending (due, or never
 * reconciled), failing (the last attempt failed; retried with backoff); the three add up to the stores.
 */
export interface ReconcileProgressRow {
  storesDone: number;
  storesPending: number;
  storesFailing: number;
  /** The soonest a store is due (null: no store scheduled). */
  nextDueAt: Date | null;
}

/** The log's archive (docs/reference.md §8): the horizon and the files beyond it. */
export interface ArchiveStatusRow {
  /** The highest upper bound of the archived partitions (0: none archived). */
  horizon: number;
  /** The newest occurred_at archived: an `as_of` older than this answers 410 (null: none archived). */
  asOfBefore: Date | null;
  files: number;
  bytes: number;
  newestFile: string | null;
  /** Ranges attached again from their files. */
  restored: number;
}

/** The sinks `menu-sync status` names one by one; the rest are counted. */
export const SINKS_NAMED = 20;

/**
 * The reads of `menu-sync status` and `GET /api/v1/status` (docs/reference.md §10), in plain SQL so
 * that the CLI can run them on a bare pg pool: connections without their tokens, projections,
 * sinks, the last reconcile run, the quarantine's size.
 */
export class StatusRepository {
  constructor(
    private readonly db: SqlReader,
    private readonly projections: ReadonlyArray<{ name: string; schema: string }>,
  ) {}

  async connections(): Promise<ConnectionStatusRow[]> {
    const rows: Array<{
      id: number;
      state: string;
      owner_id: string | null;
      sandbox: boolean;
      expires_at: Date;
      last_error: string | null;
      subscriptions: number;
      newest: { id: number; status: string; last_error: string | null } | null;
    }> = await this.db.query(
      `SELECT c.id::int AS id, c.state, c.owner_id, c.sandbox,
              c.token_created_at + make_interval(secs => c.expires_in) AS expires_at, c.last_error,
              (SELECT count(*)::int FROM subscriptions s WHERE s.connection_id = c.id) AS subscriptions,
              (SELECT json_build_object('id', s.id, 'status', s.status, 'last_error', s.last_error)
                 FROM subscriptions s WHERE s.connection_id = c.id ORDER BY s.id DESC LIMIT 1) AS newest
         FROM connections c ORDER BY c.id`,
    );
    return rows.map((row) => ({
      id: row.id,
      state: row.state,
      ownerId: row.owner_id,
      sandbox: row.sandbox,
      expiresAt: new Date(row.expires_at),
      lastError: row.last_error,
      subscriptions: row.subscriptions,
      newestSubscription: row.newest && {
        id: Number(row.newest.id),
        status: row.newest.status,
        lastError: row.newest.last_error,
      },
    }));
  }

  /** Each projection's checkpoint, lag (entries past it), parked entries and the oldest entry waiting. */
  async projectionStates(): Promise<ProjectionStatusRow[]> {
    const [{ head }] = await this.db.query(`SELECT coalesce(max(position), 0)::text AS head FROM event_log`);
    return Promise.all(
      this.projections.map(async ({ name, schema }) => {
        const [row] = await this.db.query(
          `SELECT c.position::text AS position, c.updated_at,
                  (SELECT count(*)::int FROM event_log e WHERE (e.transaction_id, e.position) > (c.transaction_id, c.position)) AS lag,
                  (SELECT e.received_at FROM event_log e WHERE (e.transaction_id, e.position) > (c.transaction_id, c.position)
                    ORDER BY e.transaction_id, e.position LIMIT 1) AS waiting_since,
                  (SELECT count(*)::int FROM ${schema}.parked_events) AS parked,
                  (SELECT error FROM ${schema}.parked_events ORDER BY parked_at DESC, position DESC LIMIT 1) AS last_error
             FROM ${schema}.checkpoint c`,
        );
        return {
          name,
          position: Number(row.position),
          head: Number(head),
          lag: row.lag,
          parked: row.parked,
          lastError: row.last_error,
          waitingSince: row.waiting_since === null ? null : new Date(row.waiting_since),
          checkpointMovedAt: new Date(row.updated_at),
        };
      }),
    );
  }

  /**
   * Sinks by state, and those that need attention (docs/reference.md §10): `failing`, or retrying
   * having never delivered, or retrying since at least `attentionAfterMs` ago. undefined when the
   * database has no sinks table (a daemon from before docs/reference.md §11).
   */
  async sinks(attentionAfterMs: number): Promise<SinkStatusCounts | undefined> {
    const [{ present }] = await this.db.query(`SELECT to_regclass('sinks') IS NOT NULL AS present`);
    if (!present) return undefined;
    // One statement, so that the counts and the sinks named are of one snapshot.
    const [row] = await this.db.query(
      `WITH s AS (
         SELECT id::text, kind, state, failing_since, last_success_at, last_error,
                (state = 'failing' OR (state = 'retrying' AND (last_success_at IS NULL
                   OR failing_since <= now() - make_interval(secs => $1::double precision / 1000)))) AS needs
           FROM sinks)
       SELECT (SELECT coalesce(json_object_agg(state, n), '{}') FROM (SELECT state, count(*) AS n FROM s GROUP BY state) c) AS by_state,
              (SELECT count(*)::int FROM s WHERE needs) AS attention,
              (SELECT coalesce(json_agg(n ORDER BY n.failing_since NULLS LAST, n.id), '[]')
                 FROM (SELECT id, kind, state, failing_since, last_success_at, last_error FROM s WHERE needs
                        ORDER BY failing_since NULLS LAST, id LIMIT $2) n) AS named`,
      [attentionAfterMs, SINKS_NAMED],
    );
    const byState: Record<string, number> = { active: 0, retrying: 0, failing: 0, disabled: 0 };
    for (const [state, n] of Object.entries(row.by_state as Record<string, number>)) byState[state] = Number(n);
    const date = (value: unknown) => (value === null ? null : new Date(value as string));
    return {
      total: Object.values(byState).reduce((sum, n) => sum + n, 0),
      byState,
      attention: row.attention,
      needingAttention: (row.named as Array<Record<string, unknown>>).map((sink) => ({
        id: String(sink.id),
        kind: String(sink.kind),
        state: String(sink.state),
        failingSince: date(sink.failing_since),
        lastSuccessAt: date(sink.last_success_at),
        lastError: (sink.last_error as string | null) ?? null,
      })),
    };
  }

  async lastReconcile(): Promise<ReconcileStatusRow | undefined> {
    const [row] = await this.db.query(
      `SELECT id::int AS id, trigger, outcome, started_at, report->'errors' AS errors FROM reconcile_runs ORDER BY id DESC LIMIT 1`,
    );
    return (
      row && {
        id: row.id,
        trigger: row.trigger,
        outcome: row.outcome,
        startedAt: new Date(row.started_at).toISOString(),
        errors: row.errors ?? [],
      }
    );
  }

  /** undefined when the database has no reconcile_stores table (before its migration). */
  async reconcileProgress(): Promise<ReconcileProgressRow | undefined> {
    const [exists] = await this.db.query(`SELECT to_regclass('reconcile_stores') IS NOT NULL AS present`);
    if (!exists.present) return undefined;
    const [row] = await this.db.query(
      `SELECT count(*) FILTER (WHERE s.consecutive_failures = 0 AND s.last_reconciled_at IS NOT NULL AND s.next_due_at > now())::int AS done,
              count(*) FILTER (WHERE s.consecutive_failures = 0 AND (s.last_reconciled_at IS NULL OR s.next_due_at <= now()))::int AS pending,
              count(*) FILTER (WHERE s.consecutive_failures > 0)::int AS failing,
              min(s.next_due_at) AS next_due_at
         FROM reconcile_stores s JOIN connections c ON c.id = s.connection_id AND c.state = 'active'
        WHERE s.owned`,
    );
    return {
      storesDone: row.done,
      storesPending: row.pending,
      storesFailing: row.failing,
      nextDueAt: row.next_due_at === null ? null : new Date(row.next_due_at),
    };
  }

  /** undefined when the database has no archive table (before its migration). */
  async archive(): Promise<ArchiveStatusRow | undefined> {
    const [exists] = await this.db.query(`SELECT to_regclass('event_log_archives') IS NOT NULL AS present`);
    if (!exists.present) return undefined;
    const [row] = await this.db.query(
      `SELECT count(*) FILTER (WHERE state = 'archived')::int AS files,
              coalesce(sum(bytes) FILTER (WHERE state = 'archived'), 0)::text AS bytes,
              coalesce(max(upper_bound) FILTER (WHERE state = 'archived'), 0)::text AS horizon,
              max(last_occurred_at) FILTER (WHERE state = 'archived') AS as_of_before,
              (SELECT a.file FROM event_log_archives a WHERE a.state = 'archived' ORDER BY a.upper_bound DESC LIMIT 1) AS newest_file,
              count(*) FILTER (WHERE state = 'restored')::int AS restored
         FROM event_log_archives`,
    );
    return {
      horizon: Number(row.horizon),
      asOfBefore: row.as_of_before === null ? null : new Date(row.as_of_before),
      files: row.files,
      bytes: Number(row.bytes),
      newestFile: row.newest_file,
      restored: row.restored,
    };
  }

  async quarantined(): Promise<number> {
    const [row] = await this.db.query(`SELECT count(*)::int AS count FROM quarantine`);
    return row.count;
  }
}

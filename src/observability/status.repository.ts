import { DataSource } from 'typeorm';

export interface ConnectionStatusRow {
  id: number;
  state: string;
  ownerId: string | null;
  sandbox: boolean;
  expiresAt: Date;
  lastError: string | null;
  subscriptions: number;
  failedSubscriptions: number;
}

export interface SinkStatusRow {
  id: string;
  kind: string | null;
  state: string;
  lastError: string | null;
}

/**
 * The reads of `menu-sync status` that no other repository has: connections without their tokens,
 * the quarantine's size, and the sinks (docs/reference.md §11) when this database has their table.
 */
export class StatusRepository {
  constructor(private readonly dataSource: DataSource) {}

  async connections(): Promise<ConnectionStatusRow[]> {
    const rows: Array<{
      id: number;
      state: string;
      owner_id: string | null;
      sandbox: boolean;
      expires_at: Date;
      last_error: string | null;
      subscriptions: number;
      failed: number;
    }> = await this.dataSource.query(
      `SELECT c.id::int AS id, c.state, c.owner_id, c.sandbox, c.token_created_at + make_interval(secs => c.expires_in) AS expires_at,
              c.last_error, count(s.id)::int AS subscriptions, count(s.id) FILTER (WHERE s.status = 'failed')::int AS failed
         FROM connections c LEFT JOIN subscriptions s ON s.connection_id = c.id
        GROUP BY c.id ORDER BY c.id`,
    );
    return rows.map((row) => ({
      id: row.id,
      state: row.state,
      ownerId: row.owner_id,
      sandbox: row.sandbox,
      expiresAt: row.expires_at,
      lastError: row.last_error,
      subscriptions: row.subscriptions,
      failedSubscriptions: row.failed,
    }));
  }

  async quarantined(): Promise<number> {
    const [row] = await this.dataSource.query(`SELECT count(*)::int AS count FROM quarantine`);
    return row.count;
  }

  /** undefined when the sinks table does not exist (a daemon from before docs/reference.md §11). */
  async sinks(): Promise<SinkStatusRow[] | undefined> {
    const [{ present }] = await this.dataSource.query(`SELECT to_regclass('sinks') IS NOT NULL AS present`);
    if (!present) return undefined;
    // Read as JSON: only the columns every version of the table has are relied upon.
    const rows: Array<{ sink: Record<string, unknown> }> = await this.dataSource.query(
      `SELECT to_jsonb(s) AS sink FROM sinks s ORDER BY to_jsonb(s)->>'created_at', to_jsonb(s)->>'id'`,
    );
    return rows.map(({ sink }) => ({
      id: String(sink.id),
      kind: typeof sink.kind === 'string' ? sink.kind : null,
      state: String(sink.state ?? 'unknown'),
      lastError: typeof sink.last_error === 'string' ? sink.last_error : null,
    }));
  }
}

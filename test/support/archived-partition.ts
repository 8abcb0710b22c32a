import pg from 'pg';

/** What an archived partition's row names (as the archive would write it). */
export interface ArchivedPartition {
  partition: string;
  lowerBound: number;
  upperBound: number;
  file: string;
  bytes: number;
  events: number;
  lastOccurredAt: Date | null;
}

const KEPT_SCHEMA = 'archived_partitions';

/**
 * Archives a partition of `event_log` without the archive's code, as the superuser the tests use:
 * in one transaction, an `archived` row of `event_log_archives` made from the partition's contents
 * (the file is named, not written) and the partition detached and dropped. With `keep`, the
 * partition is moved to a schema of its own instead, for restorePartition.
 */
export async function archivePartition(
  url: string,
  partition: string,
  options: { file?: string; bytes?: number; keep?: boolean } = {},
): Promise<ArchivedPartition> {
  return withClient(url, async (client) => {
    await client.query('BEGIN');
    try {
      const { rows: bounds } = await client.query(
        `SELECT coalesce(lower, 0)::text AS lower, upper::text AS upper FROM event_log_partitions() WHERE partition = $1::regclass`,
        [partition],
      );
      if (bounds.length === 0) throw new Error(`${partition} is not a partition of event_log`);
      const file = options.file ?? `${partition}.ndjson.gz`;
      const bytes = options.bytes ?? 4096;
      const {
        rows: [row],
      } = await client.query(
        `INSERT INTO event_log_archives (partition_name, lower_bound, upper_bound, first_position, last_position, events,
                first_occurred_at, last_occurred_at, first_received_at, last_received_at, file, bytes, sha256,
                events_sha256, rows_sha256, state, archived_at)
         SELECT $1, $2, $3, min(position), max(position), count(*), min(occurred_at), max(occurred_at),
                min(received_at), max(received_at), $4, $5, repeat('0', 64), repeat('0', 64), repeat('0', 64), 'archived', now()
           FROM ${quoted(partition)}
         RETURNING events::int AS events, last_occurred_at`,
        [partition, bounds[0].lower, bounds[0].upper, file, bytes],
      );
      await client.query(`ALTER TABLE event_log DETACH PARTITION ${quoted(partition)}`);
      if (options.keep) {
        await client.query(`CREATE SCHEMA IF NOT EXISTS ${KEPT_SCHEMA}`);
        await client.query(`ALTER TABLE ${quoted(partition)} SET SCHEMA ${KEPT_SCHEMA}`);
      } else await client.query(`DROP TABLE ${quoted(partition)}`);
      await client.query('COMMIT');
      return {
        partition,
        lowerBound: Number(bounds[0].lower),
        upperBound: Number(bounds[0].upper),
        file,
        bytes,
        events: row.events,
        lastOccurredAt: row.last_occurred_at,
      };
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    }
  });
}

/** Attaches a partition archived with `keep` again and marks its row `restored`, as `archive restore` would. */
export async function restorePartition(url: string, archived: ArchivedPartition): Promise<void> {
  await withClient(url, async (client) => {
    await client.query('BEGIN');
    try {
      const table = quoted(archived.partition);
      await client.query(`ALTER TABLE ${KEPT_SCHEMA}.${table} SET SCHEMA public`);
      const from = archived.lowerBound === 0 ? 'MINVALUE' : String(archived.lowerBound);
      await client.query(
        `ALTER TABLE event_log ATTACH PARTITION ${table} FOR VALUES FROM (${from}) TO (${archived.upperBound})`,
      );
      await client.query(
        `UPDATE event_log_archives SET state = 'restored', restored_at = now() WHERE partition_name = $1 AND state = 'archived'`,
        [archived.partition],
      );
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    }
  });
}

/** Moves the log's position sequence so that the next append lands at `position` (a later partition). */
export async function appendNextAt(url: string, position: number): Promise<void> {
  await withClient(url, (client) => client.query(`SELECT setval('event_log_position_seq', $1)`, [position - 1]));
}

function quoted(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain table name: ${name}`);
  return name;
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

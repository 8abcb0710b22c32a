import type { DataSource, QueryRunner } from 'typeorm';
import type { ManifestCheckpoint, ManifestEntry } from './archive-manifest.js';
import type { LinesDigest, WrittenFile } from './archive-file.js';

/** A partition of the log, by its range (the first one's MINVALUE read as 0). */
export interface Partition {
  name: string;
  lower: number;
  upper: number;
}

/** What a partition holds, as PostgreSQL computes it (the same digests as a file's lines). */
export interface PartitionDigest extends LinesDigest {
  firstOccurredAt: Date | null;
  lastOccurredAt: Date | null;
  firstReceivedAt: Date | null;
  lastReceivedAt: Date | null;
}

export interface ArchiveRow extends ManifestEntry {
  id: string;
}

interface StoredRow {
  id: string;
  file: string;
  partition_name: string;
  lower_bound: string;
  upper_bound: string;
  first_position: string | null;
  last_position: string | null;
  events: string;
  bytes: string;
  sha256: string;
  events_sha256: string;
  rows_sha256: string;
  checkpoint_position: string | null;
  checkpoints: Record<string, ManifestCheckpoint>;
  state: ManifestEntry['state'];
  archived_at: Date | null;
}

/**
 * Entries read per statement of an export. An order event's line is 10–20 kB, and a page is held
 * three times over (its rows, the page read ahead, the text given to the compressor): 2,000 made
 * the command's peak RSS 471 MiB on the lifecycle bench, over its 300 MB budget.
 */
export const EXPORT_PAGE = 500;
const LOCK_TIMEOUT = '500ms';
const LOCK_ATTEMPTS = 60;

/** The archive's SQL: which partitions are closed, their lines and digests, and the functions of migration 1767000000000. */
export class ArchiveRepository {
  constructor(private readonly dataSource: DataSource) {}

  /**
   * The closed partitions, oldest first: every position below the upper bound taken, never the
   * newest partition, not archived yet. Whether their entries are all committed is `isSettled`'s.
   */
  async closedPartitions(): Promise<Partition[]> {
    const rows: Array<{ name: string; lower: string; upper: string }> = await this.dataSource.query(
      `WITH parts AS (SELECT partition::text AS name, coalesce(lower, 0) AS lower, upper FROM event_log_partitions())
       SELECT p.name, p.lower::text AS lower, p.upper::text AS upper FROM parts p
        WHERE p.upper < (SELECT max(upper) FROM parts)
          AND p.upper - 1 <= (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM event_log_position_seq)
        ORDER BY p.upper`,
    );
    return rows.map((row) => ({ name: row.name, lower: Number(row.lower), upper: Number(row.upper) }));
  }

  /** Whether every transaction that wrote in `partition` is older than the log's horizon, and its newest `received_at`. */
  async settled(partition: Partition): Promise<{ settled: boolean; lastReceivedAt: Date | null }> {
    const [row]: Array<{ settled: boolean; last_received_at: Date | null }> = await this.dataSource.query(
      `SELECT coalesce(max(transaction_id) < event_log_horizon(), true) AS settled, max(received_at) AS last_received_at
         FROM event_log WHERE position >= $1 AND position < $2`,
      [partition.lower, partition.upper],
    );
    return { settled: row.settled, lastReceivedAt: row.last_received_at };
  }

  /** The lines of `partition` in position order, a page at a time; the next page is read while the caller writes this one. */
  async *lines(partition: Partition, table = partition.name): AsyncGenerator<string[]> {
    const page = (after: number): Promise<Array<{ entry_position: string; line: string }>> => {
      const rows = this.dataSource.query(
        `SELECT entry_position::text, line FROM event_log_archive_lines($1::regclass, $2, $3)`,
        [table, after, EXPORT_PAGE],
      );
      // A page read ahead for a caller that stopped must not fail unhandled.
      rows.catch(() => undefined);
      return rows;
    };
    let next = page(partition.lower - 1);
    for (;;) {
      const rows = await next;
      if (rows.length === EXPORT_PAGE) next = page(Number(rows[rows.length - 1].entry_position));
      if (rows.length > 0) yield rows.map((row) => row.line);
      if (rows.length < EXPORT_PAGE) return;
    }
  }

  async digest(table: string): Promise<PartitionDigest> {
    const [row] = await this.dataSource.query(`SELECT * FROM event_log_archive_digest($1::regclass)`, [table]);
    return {
      events: Number(row.events),
      firstPosition: row.first_position === null ? null : Number(row.first_position),
      lastPosition: row.last_position === null ? null : Number(row.last_position),
      eventsSha256: row.events_sha256,
      rowsSha256: row.rows_sha256,
      firstOccurredAt: row.first_occurred_at,
      lastOccurredAt: row.last_occurred_at,
      firstReceivedAt: row.first_received_at,
      lastReceivedAt: row.last_received_at,
    };
  }

  /**
   * The newest checkpoint of each projection, when it holds every entry of `partition` (no entry
   * after it in reader order); a projection missing from the answer has none that does.
   */
  async coveringCheckpoints(partition: Partition, projections: string[]): Promise<Record<string, ManifestCheckpoint>> {
    const rows: Array<{ projection: string; transaction_id: string; position: string }> = await this.dataSource.query(
      `SELECT c.projection, c.transaction_id::text AS transaction_id, c.position::text AS position
         FROM unnest($3::text[]) AS p(name)
         CROSS JOIN LATERAL (SELECT * FROM projection_checkpoints k WHERE k.projection = p.name
                              ORDER BY k.transaction_id DESC, k.position DESC LIMIT 1) c
        WHERE NOT EXISTS (SELECT 1 FROM event_log e WHERE e.position >= $1 AND e.position < $2
                             AND (e.transaction_id, e.position) > (c.transaction_id, c.position))`,
      [partition.lower, partition.upper, projections],
    );
    return Object.fromEntries(
      rows.map((row) => [row.projection, { transaction_id: row.transaction_id, position: row.position }]),
    );
  }

  /** Records `partition` as exported to `file` (replacing a row of an earlier try or a restore); answers its id. */
  async recordExported(
    partition: Partition,
    file: string,
    written: WrittenFile,
    digest: PartitionDigest,
    checkpoints: Record<string, ManifestCheckpoint>,
  ): Promise<string> {
    const positions = Object.values(checkpoints).map((checkpoint) => Number(checkpoint.position));
    return this.dataSource.transaction(async (manager) => {
      await manager.query(
        `DELETE FROM event_log_archives WHERE lower_bound = $1 AND state IN ('exported', 'restored')`,
        [partition.lower],
      );
      const [{ id }]: Array<{ id: string }> = await manager.query(
        `INSERT INTO event_log_archives (partition_name, lower_bound, upper_bound, first_position, last_position, events,
           first_occurred_at, last_occurred_at, first_received_at, last_received_at, file, bytes, sha256,
           events_sha256, rows_sha256, checkpoint_position, checkpoints, state)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 'exported')
         RETURNING id::text AS id`,
        [
          partition.name,
          partition.lower,
          partition.upper,
          digest.firstPosition,
          digest.lastPosition,
          digest.events,
          digest.firstOccurredAt,
          digest.lastOccurredAt,
          digest.firstReceivedAt,
          digest.lastReceivedAt,
          file,
          written.bytes,
          written.sha256,
          written.eventsSha256,
          written.rowsSha256,
          positions.length === 0 ? null : Math.min(...positions),
          JSON.stringify(checkpoints),
        ],
      );
      return id;
    });
  }

  /** Detaches and drops the partition of archive `id` and marks it `archived`, in one transaction. */
  detach(id: string): Promise<void> {
    return this.withLock((runner) => runner.query(`SELECT event_log_archive_detach($1)`, [id]));
  }

  /** An empty, unattached table for the restore of archive `id`. */
  async createForRestore(id: string): Promise<void> {
    await this.dataSource.query(`SELECT event_log_archive_create($1)`, [id]);
  }

  /** Drops the table of a restore that failed. */
  async discardRestore(id: string): Promise<void> {
    await this.dataSource.query(`SELECT event_log_archive_discard($1)`, [id]);
  }

  /** Loads `lines` (a file's) into the restore's table; answers how many entries. */
  async load(id: string, lines: string[]): Promise<number> {
    const [{ loaded }] = await this.dataSource.query(`SELECT event_log_archive_load($1, $2::json) AS loaded`, [
      id,
      `[${lines.join(',')}]`,
    ]);
    return Number(loaded);
  }

  /** Attaches the restore's table once it holds exactly the archived entries, and marks the row `restored`. */
  attach(id: string): Promise<void> {
    return this.withLock((runner) => runner.query(`SELECT event_log_archive_attach($1)`, [id]));
  }

  /** Every archive row, in position order, as the manifest lists it. */
  async rows(): Promise<ArchiveRow[]> {
    const rows: StoredRow[] = await this.dataSource.query(
      `SELECT id::text AS id, file, partition_name, lower_bound::text, upper_bound::text, first_position::text,
              last_position::text, events::text, bytes::text, sha256, events_sha256, rows_sha256,
              checkpoint_position::text, checkpoints, state, archived_at
         FROM event_log_archives ORDER BY lower_bound`,
    );
    const number = (value: string | null) => (value === null ? null : Number(value));
    return rows.map((row) => ({
      id: row.id,
      file: row.file,
      partition: row.partition_name,
      lower_bound: Number(row.lower_bound),
      upper_bound: Number(row.upper_bound),
      first_position: number(row.first_position),
      last_position: number(row.last_position),
      events: Number(row.events),
      bytes: Number(row.bytes),
      sha256: row.sha256,
      events_sha256: row.events_sha256,
      rows_sha256: row.rows_sha256,
      checkpoint_position: number(row.checkpoint_position),
      checkpoints: row.checkpoints,
      state: row.state,
      archived_at: row.archived_at === null ? null : row.archived_at.toISOString(),
    }));
  }

  /** Runs `work` in a transaction that waits at most LOCK_TIMEOUT for each lock, tried again on a timeout. */
  private async withLock(work: (runner: QueryRunner) => Promise<unknown>): Promise<void> {
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    try {
      for (let attempt = 1; ; attempt++) {
        await runner.startTransaction();
        try {
          await runner.query(`SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
          await work(runner);
          await runner.commitTransaction();
          return;
        } catch (error) {
          await runner.rollbackTransaction();
          const code = (error as { driverError?: { code?: string }; code?: string }).driverError?.code;
          if (code !== '55P03' || attempt === LOCK_ATTEMPTS) throw error;
        }
      }
    } finally {
      await runner.release();
    }
  }
}

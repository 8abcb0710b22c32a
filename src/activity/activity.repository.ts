import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

/** A count to add to one minute's row of a kind and key. */
export interface ActivityCount {
  minute: Date;
  kind: string;
  key: string;
  count: number;
}

/** One minute of the history, a row per kind and key it counted (summed over keys for `changes`). */
export interface ActivityRow {
  minute: Date;
  kind: string;
  key: string;
  count: string;
}

@Injectable()
export class ActivityRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Adds the counts, in one statement, to what other processes have added. */
  async add(counts: readonly ActivityCount[]): Promise<void> {
    if (counts.length === 0) return;
    await this.dataSource.query(
      `INSERT INTO activity_minutes (minute, kind, key, count)
       SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::bigint[])
       ON CONFLICT (minute, kind, key) DO UPDATE SET count = activity_minutes.count + excluded.count`,
      [
        counts.map((count) => count.minute.toISOString()),
        counts.map((count) => count.kind),
        counts.map((count) => count.key),
        counts.map((count) => count.count),
      ],
    );
  }

  /** The rows of the minutes from `since` to `until`, in minute order; the per-connection change rows summed. */
  series(since: Date, until: Date): Promise<ActivityRow[]> {
    return this.dataSource.query(
      `SELECT minute, kind, CASE WHEN kind = 'changes' THEN '' ELSE key END AS key, sum(count)::text AS count
         FROM activity_minutes
        WHERE minute >= date_trunc('minute', $1::timestamptz) AND minute <= $2
        GROUP BY 1, 2, 3
        ORDER BY 1, 2, 3`,
      [since.toISOString(), until.toISOString()],
    );
  }

  /** Deletes the minutes older than `cutoff`; the number of rows deleted. */
  async prune(cutoff: Date): Promise<number> {
    const [, deleted]: [unknown, number] = await this.dataSource.query(
      `DELETE FROM activity_minutes WHERE minute < $1`,
      [cutoff.toISOString()],
    );
    return deleted;
  }
}

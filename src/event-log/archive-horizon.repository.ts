import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { ArchiveRow } from './archive-horizon.js';

/** The rows of `event_log_archives` the horizon is made of (the `exported` ones are still in the log, and tell `as_of` to read the archive base). */
@Injectable()
export class ArchiveHorizonRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async rows(): Promise<ArchiveRow[]> {
    const rows: Array<{
      state: ArchiveRow['state'];
      lower_bound: string;
      upper_bound: string;
      file: string;
      bytes: string;
      last_occurred_at: Date | null;
    }> = await this.dataSource.query(
      `SELECT state, lower_bound::text, upper_bound::text, file, bytes::text, last_occurred_at
         FROM event_log_archives ORDER BY upper_bound`,
    );
    return rows.map((row) => ({
      state: row.state,
      lowerBound: Number(row.lower_bound),
      upperBound: Number(row.upper_bound),
      file: row.file,
      bytes: Number(row.bytes),
      lastOccurredAt: row.last_occurred_at,
    }));
  }
}

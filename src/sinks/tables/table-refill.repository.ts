import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import type { Change, ChangePosition } from '../../changes/change.js';
import { changeColumns, RawChange, toEntry } from '../../changes/change-log.repository.js';
import { REFILL_PAGE } from './table-refill.js';

/** What a re-created table is re-filled from (docs/reference.md §12): the live resources of a type at a position. */
export interface LiveResources {
  /** The newest change at or before `at` of every resource of `type` (of `ownerIds`) whose newest change is an upsert, in pages. */
  pages(type: string, at: ChangePosition, ownerIds: readonly string[] | null): AsyncIterable<Change[]>;
}

/**
 * The daemon's change log as a re-created table's source, read as a snapshot start reads it: the
 * positions chosen in one statement, then the changes read by seq in pages. A change compaction
 * removed in between has a newer one after `at`, which the sink delivers after the refill.
 */
@Injectable()
export class TableRefillRepository implements LiveResources {
  constructor(@InjectDataSource() private readonly dataSource: Pick<DataSource, 'query'>) {}

  async *pages(type: string, at: ChangePosition, ownerIds: readonly string[] | null): AsyncIterable<Change[]> {
    const chosen: Array<{ seq: string }> = await this.dataSource.query(
      `SELECT n.seq::text AS seq FROM (
         SELECT DISTINCT ON (c.id) c.seq, c.op FROM change_log c
          WHERE (c.transaction_id, c.seq) <= ($1::xid8, $2::bigint) AND c.type = $3
            AND ($4::text[] IS NULL OR c.owner_id = ANY($4::text[]))
          ORDER BY c.id, c.transaction_id DESC, c.seq DESC) n
        WHERE n.op = 'upsert' ORDER BY n.seq`,
      [at.transactionId, at.seq, type, ownerIds === null ? null : [...ownerIds]],
    );
    for (let start = 0; start < chosen.length; start += REFILL_PAGE) {
      const rows: RawChange[] = await this.dataSource.query(
        `SELECT ${changeColumns('c')} FROM change_log c WHERE c.seq = ANY($1::bigint[]) ORDER BY c.seq`,
        [chosen.slice(start, start + REFILL_PAGE).map((row) => row.seq)],
      );
      if (rows.length > 0) yield rows.map((row) => toEntry(row).change);
    }
  }
}

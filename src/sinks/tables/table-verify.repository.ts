import type { DataSource } from 'typeorm';
import type { Change, ChangePosition } from '../../changes/change.js';
import { changeColumns, RawChange, toEntry } from '../../changes/change-log.repository.js';

/**
 * What a table sink's tables must hold at the target's cursor (docs/reference.md §12, `sinks
 * verify`): the newest change up to `cursor` of every resource of `types` (and `ownerIds`) whose
 * newest change is an upsert, read from the daemon's change log as a snapshot start reads it.
 */
export class TableVerifyRepository {
  constructor(private readonly dataSource: DataSource) {}

  async newestLive(
    cursor: ChangePosition,
    types: readonly string[],
    ownerIds: readonly string[] | null,
  ): Promise<Map<string, Change[]>> {
    const rows: RawChange[] = await this.dataSource.query(
      `SELECT ${changeColumns('n')} FROM (
         SELECT DISTINCT ON (c.type, c.id) c.* FROM change_log c
          WHERE (c.transaction_id, c.seq) <= ($1::xid8, $2::bigint) AND c.type = ANY($3::text[])
            AND ($4::text[] IS NULL OR c.owner_id = ANY($4::text[]))
          ORDER BY c.type, c.id, c.transaction_id DESC, c.seq DESC) n
        WHERE n.op = 'upsert'`,
      [cursor.transactionId, cursor.seq, [...types], ownerIds === null ? null : [...ownerIds]],
    );
    const byType = new Map<string, Change[]>(types.map((type) => [type, []]));
    for (const row of rows) byType.get(row.type)?.push(toEntry(row).change);
    return byType;
  }
}

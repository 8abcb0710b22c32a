import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ChangePage, ChangePosition, START } from '../changes/change.js';
import { comparePositions, decodeChangeCursor } from '../changes/change-cursor.js';
import { ChangeShape, changePosition, NEWEST_CHANGE_POSITION } from '../changes/change-log.repository.js';
import type { SqlSession } from '../database/postgres-connection.js';
import type { Sink } from './sink.js';

/** Where a sink starts (docs/reference.md §12), as `from` names it. */
export type SinkFrom =
  { kind: 'snapshot' } | { kind: 'start' } | { kind: 'now' } | { kind: 'cursor'; position: ChangePosition };

export const SINK_FROM_VALUES = ['snapshot', 'start', 'now'] as const;
export const SINK_FROM_MESSAGE = 'from must be "snapshot", "start", "now" or a changes cursor';

/** `from` as the API and the CLI take it; a cursor not given out by this daemon is a 400 naming `from`. */
export function parseSinkFrom(value: string): SinkFrom {
  if (value === 'snapshot' || value === 'start' || value === 'now') return { kind: value };
  return { kind: 'cursor', position: decodeChangeCursor(value, 'from') };
}

const pos = (position: ChangePosition) => [position.transactionId, position.seq];

/**
 * Sets where a sink starts, in the caller's transaction: its cursor, its snapshot and a new epoch
 * (so that a batch sent again gets a new webhook-id), clearing any batch in flight and the backoff;
 * a disabled sink stays disabled.
 *
 * `now` and a snapshot's boundary are the newest change this statement sees: every writer of the
 * change log holds its lock from before it has a transaction id until it commits, so a change
 * committed later comes after that position and is read after it (no gap). A snapshot is the
 * newest change up to the boundary of every resource the sink follows whose newest change is an
 * upsert (a deleted resource is left out), chosen here once, so the worker pages through a fixed set.
 * A sink of a few owners reads only their changes (by the owner index): a resource belongs to one
 * owner for good, so its newest change is among its owner's.
 */
export async function startSink(
  db: SqlSession,
  id: string,
  from: SinkFrom,
  types: readonly string[],
  ownerIds: readonly string[] | null,
): Promise<void> {
  const head = changePosition((await db.query(NEWEST_CHANGE_POSITION))[0]);
  const cursor = from.kind === 'now' ? head : from.kind === 'cursor' ? from.position : START;
  const boundary = from.kind === 'snapshot' && comparePositions(head, START) > 0 ? head : null;
  await db.query(`DELETE FROM sink_snapshot_entries WHERE sink_id = $1`, [id]);
  if (boundary !== null) {
    await db.query(
      `INSERT INTO sink_snapshot_entries (sink_id, transaction_id, seq)
       SELECT $1, n.transaction_id, n.seq FROM (
         SELECT DISTINCT ON (c.type, c.id) c.transaction_id, c.seq, c.op FROM change_log c
          WHERE (c.transaction_id, c.seq) <= ($2::xid8, $3::bigint) AND c.type = ANY($4::text[])
            AND ($5::text[] IS NULL OR c.owner_id = ANY($5::text[]))
          ORDER BY c.type, c.id, c.transaction_id DESC, c.seq DESC) n
        WHERE n.op = 'upsert'`,
      [id, ...pos(boundary), [...types], ownerIds === null ? null : [...ownerIds]],
    );
  }
  await db.query(
    `UPDATE sinks SET cursor_xid = $2, cursor_seq = $3, snapshot_xid = $4, snapshot_seq = $5,
       inflight_xid = NULL, inflight_seq = NULL, attempts = 0, epoch = epoch + 1, next_attempt_at = NULL,
       failing_since = NULL, state = CASE WHEN state = 'disabled' THEN state ELSE 'active' END, updated_at = now()
     WHERE id = $1`,
    [id, ...pos(cursor), boundary?.transactionId ?? null, boundary?.seq ?? null],
  );
}

/** Whether the sink is still delivering its snapshot (its cursor below the boundary). */
export function inSnapshot(sink: Pick<Sink, 'cursor' | 'snapshotTo'>): boolean {
  return sink.snapshotTo !== null && comparePositions(sink.cursor, sink.snapshotTo) < 0;
}

/** The snapshot of a sink started from `snapshot`: its pages, its size, its removal once delivered. */
@Injectable()
export class SinkSnapshots {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * The snapshot's changes after the sink's cursor, of the types and owners it follows now; a
   * short page ends at the boundary, where the sink goes on reading the change log. The entries
   * lie at or below a boundary that was committed when they were chosen, so none commits late.
   * A change compaction removed meanwhile has a newer one after the boundary, which follows.
   */
  async readAfter<R, T extends { position: ChangePosition }>(
    sink: Sink,
    types: readonly string[],
    shape: ChangeShape<R, T>,
  ): Promise<ChangePage<T>> {
    const rows: R[] = await this.dataSource.query(
      `SELECT ${shape.columns} FROM sink_snapshot_entries s JOIN change_log c ON c.seq = s.seq
        WHERE s.sink_id = $1 AND (s.transaction_id, s.seq) > ($2::xid8, $3::bigint)
          AND c.type = ANY($5::text[]) AND ($6::text[] IS NULL OR c.owner_id = ANY($6::text[]))
        ORDER BY s.transaction_id, s.seq LIMIT $4`,
      [sink.id, ...pos(sink.cursor), sink.batchSize, [...types], sink.ownerIds],
    );
    const changes = rows.map((row) => shape.make(row));
    const next = changes.length === sink.batchSize ? changes[changes.length - 1].position : sink.snapshotTo!;
    // The cursor is below the compaction horizon by design while the snapshot is delivered.
    return { changes, next, compactedTo: START };
  }

  /** The sink's cursor reached the boundary: its entries go (unless it was started again meanwhile). */
  async finish(sink: Pick<Sink, 'id' | 'epoch'>): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      const [, count] = await manager.query(
        `UPDATE sinks SET snapshot_xid = NULL, snapshot_seq = NULL WHERE id = $1 AND epoch = $2`,
        [sink.id, sink.epoch],
      );
      if (count > 0) await manager.query(`DELETE FROM sink_snapshot_entries WHERE sink_id = $1`, [sink.id]);
    });
  }
}

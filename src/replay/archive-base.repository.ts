import { Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { rangeSql, winnersSql, withLiterals } from '../projection/page-statements.js';
import { archiveBaseOf, PROJECTIONS } from '../projection/projection-definitions.js';
import type { ProjectionDefinition } from '../projection/projection-definitions.js';

/** Entries folded per statement: a page of the projector's size, so a 1M-event partition never sorts at once. */
export const ARCHIVE_BASE_PAGE = 50_000;

/**
 * The archive base (docs/reference.md §8): each projection's tables folded from the archived
 * partitions only, where `as_of` finds the newest archived version of each resource once the
 * partitions are dropped.
 */
@Injectable()
export class ArchiveBaseRepository {
  /**
   * Folds the entries with `lowerBound <= position < upperBound` into both archive bases with the
   * projector's own statements, in pages of ARCHIVE_BASE_PAGE positions. The version rule makes a
   * second fold of the same range a no-op, so a fold cut off midway is finished by running it again.
   * Entries the live projection parked stay out, as they stay out of `as_of`. Outside a
   * transaction each page commits on its own: one long transaction over a whole partition would
   * hold `event_log_horizon()` back, and with it every projector and feed, for its length. Inside
   * the caller's transaction, the pages run in it. Call it before the partition is dropped.
   * Returns the entries read (`pageSize` is for tests).
   */
  async foldIntoArchiveBase(
    runner: QueryRunner,
    lowerBound: number,
    upperBound: number,
    pageSize = ARCHIVE_BASE_PAGE,
  ): Promise<number> {
    let from = lowerBound;
    let read = 0;
    for (;;) {
      const [page]: Array<{ last: string | null; entries: number }> = await runner.query(
        `SELECT max(position)::text AS last, count(*)::int AS entries
           FROM (SELECT position FROM event_log WHERE position >= $1 AND position < $2 ORDER BY position LIMIT $3) p`,
        [from, upperBound, pageSize],
      );
      if (page.last === null) return read;
      const to = Number(page.last) + 1;
      await this.inTransaction(runner, async () => {
        // The projector's planner settings (ProjectionRepository.prepare), for this transaction only.
        for (const setting of ["work_mem = '128MB'", 'enable_nestloop = off', 'enable_seqscan = off', 'jit = off'])
          await runner.query(`SET LOCAL ${setting}`);
        for (const projection of PROJECTIONS) await this.foldPage(runner, projection, from, to);
      });
      read += page.entries;
      from = to;
    }
  }

  /** The entries of [from, to) into the projection's base: by winners first (the menu), else every change. */
  private async foldPage(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    from: number,
    to: number,
  ): Promise<void> {
    const base = archiveBaseOf(projection.schema);
    const range = `e.position >= $1::bigint AND e.position < $2::bigint
      AND NOT EXISTS (SELECT 1 FROM ${projection.schema}.parked_events parked WHERE parked.position = e.position)`;
    const params = [String(from), String(to), projection.missingError];
    const none = new Set<string>();
    if (projection.winners !== undefined) {
      const [fast] = await runner.query(withLiterals(winnersSql(projection, base, none, false, range), params));
      if (fast.missing === 0) return;
    }
    await runner.query(withLiterals(rangeSql(projection, base, none, false, { range, missingError: '$3' }), params));
  }

  private async inTransaction(runner: QueryRunner, work: () => Promise<void>): Promise<void> {
    if (runner.isTransactionActive) return work();
    await runner.startTransaction();
    try {
      await work();
      await runner.commitTransaction();
    } catch (error) {
      await runner.rollbackTransaction().catch(() => undefined);
      throw error;
    }
  }
}

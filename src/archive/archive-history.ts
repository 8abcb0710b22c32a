import path from 'node:path';
import type { DataSource, QueryRunner } from 'typeorm';
import type { ProjectionDefinition } from '../projection/projection-definitions.js';
import type { SavedCheckpoint } from '../replay/checkpoint.repository.js';
import type { LogSource } from '../replay/rebuild.service.js';
import { readLines } from './archive-file.js';
import { ArchiveError } from './archive.service.js';

/** What the archive asks of a replay: the horizon, and per projection the newest checkpoint an archived partition relied on. */
export interface ArchiveHorizon {
  horizon: number;
  required: Map<string, { transactionId: bigint; position: bigint }>;
}

/** The archive's horizon and what it requires, or null when nothing is archived (a replay is as before). */
export async function archiveHorizon(dataSource: DataSource): Promise<ArchiveHorizon | null> {
  const rows: Array<{
    upper_bound: string;
    checkpoints: Record<string, { transaction_id: string; position: string }>;
  }> = await dataSource.query(
    `SELECT upper_bound::text AS upper_bound, checkpoints FROM event_log_archives WHERE state = 'archived'`,
  );
  if (rows.length === 0) return null;
  const required = new Map<string, { transactionId: bigint; position: bigint }>();
  for (const row of rows)
    for (const [name, at] of Object.entries(row.checkpoints)) {
      const next = { transactionId: BigInt(at.transaction_id), position: BigInt(at.position) };
      const known = required.get(name);
      if (known === undefined || later(next, known)) required.set(name, next);
    }
  return { horizon: Math.max(...rows.map((row) => Number(row.upper_bound))), required };
}

/**
 * Whether `checkpoint` holds every archived entry of `projection`: it is at or after the
 * checkpoint each archived partition relied on (a later checkpoint holds what an earlier one held).
 */
export function coversArchive(
  archive: ArchiveHorizon,
  projection: ProjectionDefinition,
  checkpoint: SavedCheckpoint | null,
): boolean {
  const required = archive.required.get(projection.name);
  if (required === undefined || checkpoint === null) return false;
  const at = { transactionId: BigInt(checkpoint.at.transactionId), position: BigInt(checkpoint.at.position) };
  return !later(required, at);
}

function later(a: { transactionId: bigint; position: bigint }, b: { transactionId: bigint; position: bigint }) {
  return a.transactionId > b.transactionId || (a.transactionId === b.transactionId && a.position > b.position);
}

/**
 * Makes `event_log` on `runner`'s session the whole history: the archived files loaded into a
 * temporary table (checked against their rows) and a temporary view of it and the hot log, which
 * the session finds before `public.event_log` (pg_temp comes first). Answers the entries loaded.
 */
export async function useArchivedHistory(runner: QueryRunner, directory: string): Promise<number> {
  const rows: Array<{ file: string; events: string; events_sha256: string; rows_sha256: string }> = await runner.query(
    `SELECT file, events::text AS events, events_sha256, rows_sha256 FROM event_log_archives
      WHERE state = 'archived' ORDER BY lower_bound`,
  );
  await runner.query(`CREATE TEMP TABLE event_log_archived (LIKE public.event_log)`);
  let loaded = 0;
  for (const row of rows) {
    const read = await readLines(path.join(directory, row.file), async (lines) => {
      await runner.query(`INSERT INTO pg_temp.event_log_archived SELECT * FROM event_log_archive_entries($1::json)`, [
        `[${lines.join(',')}]`,
      ]);
    });
    if (
      read.events !== Number(row.events) ||
      read.eventsSha256 !== row.events_sha256 ||
      read.rowsSha256 !== row.rows_sha256
    )
      throw new ArchiveError(`${row.file} differs from its archive row: run menu-sync archive verify`);
    loaded += read.events;
  }
  await runner.query(`CREATE INDEX ON pg_temp.event_log_archived (transaction_id, position)`);
  await runner.query(`ANALYZE pg_temp.event_log_archived`);
  await runner.query(
    `CREATE TEMP VIEW event_log AS SELECT * FROM pg_temp.event_log_archived UNION ALL SELECT * FROM public.event_log`,
  );
  return loaded;
}

/** The whole history as a rebuild's log (`replay --from-archive`), dropped from the session after. */
export function archivedHistory(directory: string): LogSource {
  return {
    prepare: async (runner) => {
      await useArchivedHistory(runner, directory);
    },
    release: async (runner) => {
      await runner.query(`DROP VIEW IF EXISTS pg_temp.event_log`);
      await runner.query(`DROP TABLE IF EXISTS pg_temp.event_log_archived`);
    },
  };
}

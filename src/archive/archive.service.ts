import { Logger } from '@nestjs/common';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { DataSource, QueryRunner } from 'typeorm';
import { advisoryLocks, lockQuery } from '../database/advisory-locks.js';
import { PROJECTIONS } from '../projection/projection-definitions.js';
import { ArchiveBaseRepository } from '../replay/archive-base.repository.js';
import { CheckpointRepository } from '../replay/checkpoint.repository.js';
import { LinesDigest, readLines, writeLines } from './archive-file.js';
import { ManifestEntry, readManifest, writeManifest } from './archive-manifest.js';
import { ArchiveRepository, ArchiveRow, Partition } from './archive.repository.js';

/** Which closed partitions `archive` takes: those whose newest `received_at` is older than an instant, or whose upper bound is at most a position. */
export type ArchiveBefore = { instant: Date } | { position: number };

export interface ArchivedPartition {
  file: string;
  partition: string;
  lower: number;
  upper: number;
  events: number;
  bytes: number;
  checkpointPosition: number | null;
}

/** A file the manifest lists that does not match it, and how. */
export interface VerifyProblem {
  file: string;
  problem: string;
}

export class ArchiveError extends Error {}

/**
 * The event log's archive (docs/reference.md §8): closed partitions exported to files, read back
 * and checked against the partition, then detached and dropped; files checked against the
 * manifest; partitions attached again from their files. One run at a time per database (an
 * advisory lock); a run stopped at any step leaves the partition attached, and the next one
 * starts that partition over.
 */
export class ArchiveService {
  private readonly logger = new Logger(ArchiveService.name);
  private readonly repository: ArchiveRepository;

  constructor(
    private readonly dataSource: DataSource,
    private readonly directory: string,
    private readonly checkpoints = new CheckpointRepository(),
    private readonly base = new ArchiveBaseRepository(),
  ) {
    this.repository = new ArchiveRepository(dataSource);
  }

  /**
   * Archives the closed partitions `before` selects, oldest first, stopping at the first that is
   * not. With `keepRestored` (ARCHIVE_AFTER's runs), a partition restored for an investigation is
   * passed over, left attached until `menu-sync archive` takes it again.
   */
  async archive(
    before: ArchiveBefore,
    onArchived: (archived: ArchivedPartition) => Promise<void> = async () => undefined,
    { keepRestored = false }: { keepRestored?: boolean } = {},
  ): Promise<ArchivedPartition[]> {
    return this.locked(async (session) => {
      await mkdir(this.directory, { recursive: true });
      const done: ArchivedPartition[] = [];
      const restored = new Set(
        (await this.repository.rows()).filter((row) => row.state === 'restored').map((row) => row.lower_bound),
      );
      for (const partition of await this.repository.closedPartitions()) {
        if (keepRestored && restored.has(partition.lower)) continue;
        if ('position' in before && partition.upper > before.position) break;
        const { settled, lastReceivedAt } = await this.repository.settled(partition);
        if (!settled) break;
        if ('instant' in before && lastReceivedAt !== null && lastReceivedAt >= before.instant) break;
        const archived = await this.archiveOne(session, partition);
        done.push(archived);
        await onArchived(archived);
      }
      return done;
    });
  }

  /** Attaches again every archived partition holding a position of `first`…`last`, from its file. */
  async restore(
    first: number,
    last: number,
    onRestored: (restored: ArchiveRow) => Promise<void> = async () => undefined,
  ): Promise<ArchiveRow[]> {
    return this.locked(async () => {
      const rows = (await this.repository.rows()).filter(
        (row) => row.state === 'archived' && row.upper_bound > first && row.lower_bound <= last,
      );
      if (rows.length === 0) throw new ArchiveError(`no archived partition holds positions ${first}-${last}`);
      for (const row of rows) {
        await this.repository.createForRestore(row.id);
        try {
          const read = await readLines(path.join(this.directory, row.file), async (lines) => {
            await this.repository.load(row.id, lines);
          });
          const problem = difference(read, ofEntry(row));
          if (problem !== null) throw new ArchiveError(`${row.file}: ${problem}`);
          await this.repository.attach(row.id);
        } catch (error) {
          await this.repository.discardRestore(row.id).catch(() => undefined);
          throw error instanceof ArchiveError ? error : new ArchiveError(`${row.file}: ${String(error)}`);
        }
        await this.rewriteManifest();
        this.logger.log({ msg: 'partition restored', partition: row.partition, file: row.file, events: row.events });
        await onRestored(row);
      }
      return rows;
    });
  }

  private async archiveOne(session: QueryRunner, partition: Partition): Promise<ArchivedPartition> {
    const checkpoints = await this.checkpointsFor(session, partition);
    const file = `event_log_${partition.lower}-${partition.upper}.ndjson.br`;
    const target = path.join(this.directory, file);
    const written = await writeLines(target, this.repository.lines(partition));
    const read = await readLines(target);
    const digest = await this.repository.digest(partition.name);
    const problem = difference(read, written) ?? difference(digest, written);
    if (problem !== null) {
      await rm(target, { force: true });
      throw new ArchiveError(`${file} differs from ${partition.name} (${problem}): the partition stays`);
    }
    const id = await this.repository.recordExported(partition, file, written, digest, checkpoints);
    await this.rewriteManifest();
    // The partition's newest version of each resource, kept for `as_of` above the horizon (the
    // exported row already turned the base on in every process); a re-run folds it again, a no-op.
    await this.base.foldIntoArchiveBase(session, partition.lower, partition.upper);
    await this.repository.detach(id);
    await this.rewriteManifest();
    const positions = Object.values(checkpoints).map((checkpoint) => Number(checkpoint.position));
    this.logger.log({ msg: 'partition archived', partition: partition.name, file, events: written.events });
    return {
      file,
      partition: partition.name,
      lower: partition.lower,
      upper: partition.upper,
      events: written.events,
      bytes: written.bytes,
      checkpointPosition: positions.length === 0 ? null : Math.min(...positions),
    };
  }

  /** The checkpoints of every projection holding all of `partition`, one taken where none does yet. */
  private async checkpointsFor(session: QueryRunner, partition: Partition) {
    const names = PROJECTIONS.map((projection) => projection.name);
    let covering = await this.repository.coveringCheckpoints(partition, names);
    const missing = PROJECTIONS.filter((projection) => covering[projection.name] === undefined);
    if (missing.length === 0) return covering;
    for (const projection of missing) await this.checkpoints.take(session, projection);
    covering = await this.repository.coveringCheckpoints(partition, names);
    const behind = names.filter((name) => covering[name] === undefined);
    if (behind.length > 0)
      throw new ArchiveError(
        `${partition.name} stays: the ${behind.join(' and ')} projection has not applied all of it yet`,
      );
    return covering;
  }

  private async rewriteManifest(): Promise<void> {
    const rows = await this.repository.rows();
    await writeManifest(
      this.directory,
      rows.map(({ id: _, ...entry }) => entry),
    );
  }

  private async locked<T>(work: (session: QueryRunner) => Promise<T>): Promise<T> {
    const session = this.dataSource.createQueryRunner();
    await session.connect();
    try {
      const [{ result }] = await session.query(...lockQuery('pg_try_advisory_lock', advisoryLocks.single('archive')));
      if (result !== true) throw new ArchiveError('another archive run is in progress');
      try {
        return await work(session);
      } finally {
        await session.query(...lockQuery('pg_advisory_unlock', advisoryLocks.single('archive')));
      }
    } finally {
      await session.release();
    }
  }
}

type Checked = LinesDigest & { bytes?: number; sha256?: string };

function ofEntry(entry: ManifestEntry): Checked {
  return {
    events: entry.events,
    firstPosition: entry.first_position,
    lastPosition: entry.last_position,
    eventsSha256: entry.events_sha256,
    rowsSha256: entry.rows_sha256,
    bytes: entry.bytes,
    sha256: entry.sha256,
  };
}

/** Every file of the manifest in `directory` read again and compared with its entry: size, SHA-256, count, both digests. */
export async function verifyArchive(
  directory: string,
  onChecked: (file: string, problem: string | null) => void = () => undefined,
): Promise<VerifyProblem[]> {
  const manifest = await readManifest(directory);
  const problems: VerifyProblem[] = [];
  for (const entry of manifest.files) {
    let problem: string | null;
    try {
      problem = difference(await readLines(path.join(directory, entry.file)), ofEntry(entry));
    } catch (error) {
      problem = error instanceof Error ? error.message : String(error);
    }
    if (problem !== null) problems.push({ file: entry.file, problem });
    onChecked(entry.file, problem);
  }
  return problems;
}

/** How `found` differs from `expected` (a file read back, a partition, a manifest entry), or null. */
function difference(found: Checked, expected: Checked): string | null {
  for (const key of [
    'events',
    'firstPosition',
    'lastPosition',
    'eventsSha256',
    'rowsSha256',
    'bytes',
    'sha256',
  ] as const) {
    if (found[key] === undefined || expected[key] === undefined) continue;
    if (found[key] !== expected[key]) return `${key} is ${String(found[key])}, expected ${String(expected[key])}`;
  }
  return null;
}

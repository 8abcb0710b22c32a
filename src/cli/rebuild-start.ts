import type { DataSource } from 'typeorm';
import { archivedHistory, archiveHorizon, coversArchive } from '../archive/archive-history.js';
import type { ProjectionDefinition } from '../projection/projection-definitions.js';
import type { SavedCheckpoint } from '../replay/checkpoint.repository.js';
import type { LogSource, RebuildService } from '../replay/rebuild.service.js';

export interface RebuildStartOptions {
  fromCheckpoint?: boolean;
  fromArchive?: boolean;
}

export interface RebuildStart {
  /** The checkpoint the rebuild starts as, or null: the log's first entry. */
  from: SavedCheckpoint | null;
  /** The log it reads, when not the hot log: the archived files and the hot log (`--from-archive`). */
  log?: LogSource;
}

/**
 * Where `replay` or `verify` starts (docs/reference.md §8). Nothing archived: the log's first
 * entry, or with `--from-checkpoint` the projection's newest checkpoint (an error when it has
 * none). Part of the log archived: the newest checkpoint, which must hold every archived entry
 * (an error naming `--from-archive` otherwise); with `--from-archive`, the first archived entry,
 * reading the archive's files and then the hot log.
 */
export async function startOf(
  rebuild: RebuildService,
  dataSource: DataSource,
  projection: ProjectionDefinition,
  options: RebuildStartOptions,
  archiveDir: string,
  command: 'replay' | 'verify' = 'replay',
): Promise<RebuildStart> {
  if (options.fromArchive === true && options.fromCheckpoint === true)
    throw new Error('--from-archive and --from-checkpoint exclude each other');
  const archive = await archiveHorizon(dataSource);
  if (options.fromArchive === true)
    return archive === null ? { from: null } : { from: null, log: archivedHistory(archiveDir) };
  if (archive === null && options.fromCheckpoint !== true) return { from: null };
  const newest = await rebuild.newestCheckpoint(projection);
  if (archive !== null && !coversArchive(archive, projection, newest))
    throw new Error(
      `${projection.name} has no checkpoint holding the archived log (positions below ${archive.horizon}): ` +
        `${command} --from-archive rebuilds from the archive`,
    );
  if (newest === null) throw new Error(`${projection.name} has no checkpoint: run menu-sync checkpoint first`);
  return { from: newest };
}

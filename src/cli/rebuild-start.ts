import type { ProjectionDefinition } from '../projection/projection-definitions.js';
import type { SavedCheckpoint } from '../replay/checkpoint.repository.js';
import type { RebuildService } from '../replay/rebuild.service.js';

/**
 * Where `replay` or `verify` starts: with `--from-checkpoint`, the projection's newest checkpoint
 * (an error when it has none); else the log's first entry. Once part of the log is archived
 * (issue 43), the default becomes the newest checkpoint at or below the archive's horizon.
 */
export async function startOf(
  rebuild: RebuildService,
  projection: ProjectionDefinition,
  fromCheckpoint: boolean | undefined,
): Promise<SavedCheckpoint | null> {
  if (fromCheckpoint !== true) return null;
  const newest = await rebuild.newestCheckpoint(projection);
  if (newest === null) throw new Error(`${projection.name} has no checkpoint: run menu-sync checkpoint first`);
  return newest;
}

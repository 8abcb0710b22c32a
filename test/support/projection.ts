import type { QueryRunner } from 'typeorm';
import type { ProjectionDefinition } from '../../src/projection/projection-definitions.js';
import type { ProjectionRepository } from '../../src/projection/projection.repository.js';
import { ProjectionStatusRepository } from '../../src/projection/projection-status.repository.js';

/**
 * Applies pages on `runner` until each projection has covered `total` entries. Open transactions
 * anywhere in the cluster hold a gap-safe reader back for a while, so an empty page is not the end.
 */
export async function catchUp(
  projections: ProjectionRepository,
  runner: QueryRunner,
  definitions: readonly ProjectionDefinition[],
  pageSize: number,
  total: number,
  timeoutMs = 30_000,
): Promise<void> {
  const statuses = new ProjectionStatusRepository(runner.connection);
  const deadline = Date.now() + timeoutMs;
  for (const projection of definitions) {
    while ((await statuses.status(projection)).applied < total) {
      if (Date.now() > deadline) throw new Error(`${projection.name} did not catch up`);
      if ((await projections.applyPage(runner, projection, pageSize)).entries === 0)
        await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

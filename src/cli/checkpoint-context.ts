import { AuditLog } from '../audit/audit-log.service.js';
import { AuditRepository } from '../audit/audit.repository.js';
import type { AppConfig } from '../config/app-config.js';
import { CheckpointRepository, SavedCheckpoint } from '../replay/checkpoint.repository.js';
import { withDaemonDataSource } from './daemon-database.js';
import { PROJECTION_NAMES } from './option-parsers.js';
import { selectProjections } from './rebuild-context.js';

/** `menu-sync checkpoint`: each selected projection saved in turn, `done` told of each. */
export async function takeCheckpoints(
  config: AppConfig,
  name: string | undefined,
  done: (saved: SavedCheckpoint, audit: AuditLog) => Promise<void>,
): Promise<void> {
  const projections = selectProjections(name);
  if (projections === undefined) {
    process.stderr.write(`menu-sync checkpoint: --projection must be ${PROJECTION_NAMES}\n`);
    process.exitCode = 2;
    return;
  }
  await withDaemonDataSource(config, 2, async (dataSource) => {
    const audit = new AuditLog(new AuditRepository(dataSource), config);
    const checkpoints = new CheckpointRepository();
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    try {
      for (const projection of projections) await done(await checkpoints.take(runner, projection), audit);
    } finally {
      await runner.release();
    }
  });
}

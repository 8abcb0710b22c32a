import { ArchiveError, ArchiveService, type ArchiveBefore } from '../archive/archive.service.js';
import { cliActor } from '../audit/audit-actor.js';
import { AuditLog } from '../audit/audit-log.service.js';
import { AuditRepository } from '../audit/audit.repository.js';
import type { AppConfig } from '../config/app-config.js';
import { withDaemonDataSource } from './daemon-database.js';

/** Runs `work`; an ArchiveError (a refused step, another run) is printed and exits 1. */
async function reported(command: string, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (!(error instanceof ArchiveError)) throw error;
    process.stderr.write(`menu-sync ${command}: ${error.message}\n`);
    process.exitCode = 1;
  }
}

/** `menu-sync archive --before …`: each partition archived is printed and audited (`event_log.archived`). */
export function archivePartitions(config: AppConfig, before: ArchiveBefore): Promise<void> {
  return reported('archive', () =>
    withDaemonDataSource(config, 3, async (dataSource) => {
      const audit = new AuditLog(new AuditRepository(dataSource), config);
      const service = new ArchiveService(dataSource, config.ARCHIVE_DIR);
      const archived = await service.archive(before, async (one) => {
        await audit.record({
          actor: cliActor(),
          action: 'event_log.archived',
          target: one.partition,
          detail: { file: one.file, lower: one.lower, upper: one.upper, events: one.events, bytes: one.bytes },
        });
        process.stdout.write(
          `${one.partition}: ${one.events} events (positions ${one.lower}-${one.upper - 1}) archived to ${one.file}, ` +
            `${one.bytes} bytes, checkpoint at ${one.checkpointPosition ?? 'none'}\n`,
        );
      });
      if (archived.length === 0) process.stdout.write('no closed partition to archive\n');
    }),
  );
}

/** `menu-sync archive restore <first>-<last>`: each partition attached again is printed and audited (`event_log.restored`). */
export function restorePartitions(config: AppConfig, first: number, last: number): Promise<void> {
  return reported('archive restore', () =>
    withDaemonDataSource(config, 3, async (dataSource) => {
      const audit = new AuditLog(new AuditRepository(dataSource), config);
      await new ArchiveService(dataSource, config.ARCHIVE_DIR).restore(first, last, async (row) => {
        await audit.record({
          actor: cliActor(),
          action: 'event_log.restored',
          target: row.partition,
          detail: { file: row.file, lower: row.lower_bound, upper: row.upper_bound, events: row.events },
        });
        process.stdout.write(
          `${row.partition}: ${row.events} events (positions ${row.lower_bound}-${row.upper_bound - 1}) restored from ${row.file}\n`,
        );
      });
    }),
  );
}

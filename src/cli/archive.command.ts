import { InvalidArgumentError } from 'commander';
import { Command, CommandRunner, Option, SubCommand } from 'nest-commander';
import type { ArchiveBefore } from '../archive/archive.service.js';
import { AppConfig } from '../config/app-config.js';

/** `--before`: an integer is a position, anything else an ISO 8601 instant. */
export function beforeOption(value: string): ArchiveBefore {
  if (/^\d{1,16}$/.test(value)) return { position: Number(value) };
  const instant = /^\d{4}-\d{2}-\d{2}/.test(value) ? new Date(value) : new Date(NaN);
  if (Number.isNaN(instant.getTime()))
    throw new InvalidArgumentError(`--before must be an ISO 8601 instant or a position, got ${JSON.stringify(value)}`);
  return { instant };
}

/** `menu-sync archive verify` (docs/reference.md §8): every file against the manifest; exit 1 naming each that differs. */
@SubCommand({
  name: 'verify',
  description: "Check every archive file against the manifest: size, SHA-256, entries' digests",
})
export class ArchiveVerifyCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(): Promise<void> {
    // The files and the manifest only: no database.
    const { verifyArchive } = await import('../archive/archive.service.js');
    const problems = await verifyArchive(this.config.ARCHIVE_DIR, (file, problem) => {
      if (problem === null) process.stdout.write(`${file}: ok\n`);
      else process.stderr.write(`${file}: differs from the manifest: ${problem}\n`);
    });
    process.exitCode = problems.length === 0 ? 0 : 1;
  }
}

/** `menu-sync archive restore <first>-<last>`: the archived partitions holding those positions attached again. */
@SubCommand({
  name: 'restore',
  arguments: '<range>',
  description: 'Attach again the archived partitions holding positions <first>-<last>, from their files',
})
export class ArchiveRestoreCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run([range]: string[]): Promise<void> {
    const match = /^(\d{1,16})-(\d{1,16})$/.exec(range);
    if (match === null || Number(match[1]) > Number(match[2])) {
      process.stderr.write(`menu-sync archive restore: the range must be <first>-<last> (positions), got ${range}\n`);
      process.exitCode = 2;
      return;
    }
    const { restorePartitions } = await import('./archive-context.js');
    await restorePartitions(this.config, Number(match[1]), Number(match[2]));
  }
}

interface ArchiveOptions {
  before?: ArchiveBefore;
}

@Command({
  name: 'archive',
  description:
    'Export the closed partitions of the event log older than --before (or ARCHIVE_AFTER) to ARCHIVE_DIR, check, detach and drop them',
  subCommands: [ArchiveVerifyCommand, ArchiveRestoreCommand],
})
export class ArchiveCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], options: ArchiveOptions): Promise<void> {
    const after = this.config.archiveAfterMs;
    const before = options.before ?? (after === null ? undefined : { instant: new Date(Date.now() - after) });
    if (before === undefined) {
      process.stderr.write('menu-sync archive: give --before <instant|position> (or set ARCHIVE_AFTER)\n');
      process.exitCode = 2;
      return;
    }
    const { archivePartitions } = await import('./archive-context.js');
    await archivePartitions(this.config, before);
  }

  @Option({
    flags: '--before <instant|position>',
    description:
      'closed partitions whose newest entry was received before this instant, or that end at or below this position',
  })
  parseBefore(value: string): ArchiveBefore {
    return beforeOption(value);
  }
}

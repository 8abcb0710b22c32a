import { Command, CommandRunner, Option, SubCommand } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { printJson } from './output.js';
import { resolveSinkId, runSinkCommand, runSinkRead } from './sinks-client.js';
import { formatSink, formatSinkTable } from './sinks-output.js';
import { SinksVerifyCommand } from './sinks-verify.command.js';

const JSON_OPTION = { flags: '--json', description: 'print the answer as JSON, as the API gives it' };

const list = (value: string) =>
  value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
const integer = (value: string) => (/^\d{1,9}$/.test(value) ? Number(value) : value);

interface AddFlags {
  kind?: string;
  url?: string;
  types?: string[];
  ownerIds?: string[];
  batchSize?: number | string;
  timeoutMs?: number | string;
  stream?: string;
  subjectPrefix?: string;
  from?: string;
  schema?: string;
  tablePrefix?: string;
  json?: boolean;
}

/** `menu-sync sinks add --kind http --url URL …`: prints the sink with its secret (shown only now). */
@SubCommand({ name: 'add', description: "Add a sink; an http sink's whsec_ secret is printed once" })
export class SinksAddCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], flags: AddFlags): Promise<void> {
    await runSinkCommand('add', this.config, async (sinks) => {
      const body = {
        kind: flags.kind ?? 'http',
        url: flags.url,
        types: flags.types,
        owner_ids: flags.ownerIds,
        batch_size: flags.batchSize,
        timeout_ms: flags.timeoutMs,
        stream: flags.stream,
        subject_prefix: flags.subjectPrefix,
        from: flags.from,
        schema: flags.schema,
        table_prefix: flags.tablePrefix,
      };
      const answer = await sinks.create(
        Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined)),
      );
      if (flags.json) printJson(answer);
      else process.stdout.write(formatSink(answer.data));
    });
  }

  @Option({ flags: '--kind <kind>', description: 'http (default), nats, postgres or mysql' })
  parseKind(value: string): string {
    return value;
  }

  @Option({
    flags: '--url <url>',
    description: 'http: where batches are POSTed; postgres, mysql: the target database (postgres://… / mysql://…)',
  })
  parseUrl(value: string): string {
    return value;
  }

  @Option({ flags: '--types <list>', description: 'comma-separated resource types (default CHANGES_TYPES)' })
  parseTypes(value: string): string[] {
    return list(value);
  }

  @Option({ flags: '--owner-ids <list>', description: 'comma-separated owner ids (default every owner)' })
  parseOwnerIds(value: string): string[] {
    return list(value);
  }

  @Option({ flags: '--batch-size <n>', description: 'changes per batch (default 100)' })
  parseBatchSize(value: string): number | string {
    return integer(value);
  }

  @Option({ flags: '--timeout-ms <n>', description: 'http: answer timeout; tables: statement timeout (default 15000)' })
  parseTimeout(value: string): number | string {
    return integer(value);
  }

  @Option({ flags: '--stream <name>', description: 'nats: the JetStream stream (default MENU_SYNC)' })
  parseStream(value: string): string {
    return value;
  }

  @Option({ flags: '--subject-prefix <prefix>', description: 'nats: subject prefix (default menu)' })
  parseSubjectPrefix(value: string): string {
    return value;
  }

  @Option({
    flags: '--from <from>',
    description: 'snapshot (default: the current state, then the changes after it), start, now, or a changes cursor',
  })
  parseFrom(value: string): string {
    return value;
  }

  @Option({ flags: '--schema <name>', description: 'postgres: the schema of the tables (default menu_sync)' })
  parseSchema(value: string): string {
    return value;
  }

  @Option({ flags: '--table-prefix <prefix>', description: "mysql: the tables' name prefix (default menu_sync_)" })
  parseTablePrefix(value: string): string {
    return value;
  }

  @Option(JSON_OPTION)
  parseJson(): boolean {
    return true;
  }
}

@SubCommand({ name: 'list', description: 'List every sink with its state, lag, target and last error (oldest first)' })
export class SinksListCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], flags: { json?: boolean }): Promise<void> {
    await runSinkRead('list', this.config, async (sinks) => {
      const data = await sinks.all();
      if (flags.json) printJson({ data });
      else process.stdout.write(formatSinkTable(data));
    });
  }

  @Option(JSON_OPTION)
  parseJson(): boolean {
    return true;
  }
}

@SubCommand({
  name: 'show',
  arguments: '<id>',
  description: 'Show one sink (its id, or a prefix naming one sink): cursor, state, lag, last success and error',
})
export class SinksShowCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run([id]: string[], flags: { json?: boolean }): Promise<void> {
    await runSinkRead('show', this.config, async (sinks) => {
      const answer = await sinks.get(await resolveSinkId(sinks, id));
      if (flags.json) printJson(answer);
      else process.stdout.write(formatSink(answer.data));
    });
  }

  @Option(JSON_OPTION)
  parseJson(): boolean {
    return true;
  }
}

@SubCommand({
  name: 'replay',
  arguments: '<id>',
  description:
    'Deliver again from the start (default), the current state (snapshot), now, or after a changes cursor (id or unique prefix)',
})
export class SinksReplayCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run([id]: string[], flags: { from?: string; json?: boolean }): Promise<void> {
    await runSinkCommand('replay', this.config, async (sinks) => {
      const answer = await sinks.replay(await resolveSinkId(sinks, id), flags.from ?? 'start');
      if (flags.json) printJson(answer);
      else process.stdout.write(`replaying ${answer.data.id} from ${flags.from ?? 'start'}\n`);
    });
  }

  @Option({ flags: '--from <from>', description: 'start (default), snapshot, now, or a changes cursor' })
  parseFrom(value: string): string {
    return value;
  }

  @Option(JSON_OPTION)
  parseJson(): boolean {
    return true;
  }
}

@SubCommand({ name: 'remove', arguments: '<id>', description: 'Remove a sink (its id, or a prefix naming one sink)' })
export class SinksRemoveCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run([id]: string[]): Promise<void> {
    await runSinkCommand('remove', this.config, async (sinks) => {
      const full = await resolveSinkId(sinks, id);
      await sinks.remove(full);
      process.stdout.write(`removed ${full}\n`);
    });
  }
}

@Command({
  name: 'sinks',
  description: 'Manage push sinks: add, list, show, replay, verify, remove',
  subCommands: [
    SinksAddCommand,
    SinksListCommand,
    SinksShowCommand,
    SinksReplayCommand,
    SinksVerifyCommand,
    SinksRemoveCommand,
  ],
})
export class SinksCommand extends CommandRunner {
  async run(): Promise<void> {
    process.stderr.write(
      'menu-sync sinks: give a subcommand: add | list | show <id> | replay <id> | verify <id> | remove <id>\n',
    );
    process.exitCode = 2;
  }
}

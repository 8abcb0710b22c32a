import { DynamicModule, Module } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { Command, CommandRunner, Option, SubCommand } from 'nest-commander';
import { cliActor } from '../audit/audit-actor.js';
import { AppError } from '../common/app-error.js';
import { createValidationPipe } from '../common/validation.pipe.js';
import { AppConfig } from '../config/app-config.js';
import { ConfigModule } from '../config/config.module.js';
import { DatabaseModule } from '../database/database.module.js';
import { CreateSinkDto, ReplaySinkDto } from '../sinks/api/sinks.dto.js';
import { SinkNotFoundError } from '../sinks/sinks.errors.js';
import { SinkStoreModule } from '../sinks/sinks.module.js';
import { SinksService } from '../sinks/api/sinks.service.js';
import type { SinkView } from '../sinks/api/sink-view.js';
import { printJson } from './auth-context.js';
import { withDaemonContext } from './daemon-database.js';

/** Sink management on the daemon's database; the running daemon's dispatcher picks changes up within a second. */
@Module({})
class SinkCommandsModule {
  static register(config: AppConfig, databaseUrl: string): DynamicModule {
    return {
      module: SinkCommandsModule,
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forRoot({ url: databaseUrl, poolSize: 2 }),
        EventEmitterModule.forRoot(),
        SinkStoreModule,
      ],
    };
  }
}

/**
 * Runs `work` with SinksService on the daemon's database (migrated first unless MIGRATIONS_RUN=false).
 * Exit codes: an unknown sink → 1; input the API would refuse (4XX other than 404) → 2, bad usage.
 */
async function runSinkCommand(
  command: string,
  config: AppConfig,
  work: (sinks: SinksService) => Promise<void>,
): Promise<void> {
  try {
    await withDaemonContext(
      config,
      (url) => SinkCommandsModule.register(config, url),
      (app) => work(app.get(SinksService)),
    );
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    const field = typeof error.extra.field === 'string' ? ` (${error.extra.field})` : '';
    process.stderr.write(`menu-sync sinks ${command}: ${error.detail}${field}\n`);
    process.exitCode = error instanceof SinkNotFoundError || error.status >= 500 ? 1 : 2;
  }
}

const validation = createValidationPipe();
/** Sinks per page read by `sinks list`. */
const LIST_PAGE = 100;
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
      const plain = Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));
      const dto = (await validation.transform(plain, { type: 'body', metatype: CreateSinkDto })) as CreateSinkDto;
      printJson(await sinks.create(dto, cliActor()));
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
}

@SubCommand({ name: 'list', description: 'List every sink with its cursor, state, lag and last error (oldest first)' })
export class SinksListCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(): Promise<void> {
    await runSinkCommand('list', this.config, async (sinks) => {
      const data: SinkView[] = [];
      for await (const page of sinks.all({ limit: LIST_PAGE, order: 'created' })) data.push(...page);
      printJson({ data });
    });
  }
}

@SubCommand({
  name: 'replay',
  arguments: '<id>',
  description: 'Deliver again from the start (default), the current state (snapshot), now, or after a changes cursor',
})
export class SinksReplayCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run([id]: string[], flags: { from?: string }): Promise<void> {
    await runSinkCommand('replay', this.config, async (sinks) => {
      const dto = (await validation.transform(
        { from: flags.from ?? 'start' },
        { type: 'body', metatype: ReplaySinkDto },
      )) as ReplaySinkDto;
      printJson(await sinks.replay(id, dto, cliActor()));
    });
  }

  @Option({ flags: '--from <from>', description: 'start (default), snapshot, now, or a changes cursor' })
  parseFrom(value: string): string {
    return value;
  }
}

@SubCommand({ name: 'remove', arguments: '<id>', description: 'Remove a sink' })
export class SinksRemoveCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run([id]: string[]): Promise<void> {
    await runSinkCommand('remove', this.config, async (sinks) => {
      await sinks.remove(id, cliActor());
      process.stderr.write(`menu-sync sinks remove: removed ${id}\n`);
    });
  }
}

@Command({
  name: 'sinks',
  description: 'Manage push sinks: add, list, replay, remove',
  subCommands: [SinksAddCommand, SinksListCommand, SinksReplayCommand, SinksRemoveCommand],
})
export class SinksCommand extends CommandRunner {
  async run(): Promise<void> {
    process.stderr.write('menu-sync sinks: give a subcommand: add | list | replay <id> | remove <id>\n');
    process.exitCode = 2;
  }
}

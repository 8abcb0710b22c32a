import { DynamicModule, Module } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { cliActor } from '../audit/audit-actor.js';
import { AppError } from '../common/app-error.js';
import { createValidationPipe } from '../common/validation.pipe.js';
import { AppConfig } from '../config/app-config.js';
import { ConfigModule } from '../config/config.module.js';
import { DatabaseModule } from '../database/database.module.js';
import { CreateSinkDto, ReplaySinkDto } from '../sinks/api/sinks.dto.js';
import { SinkStoreModule } from '../sinks/sinks.module.js';
import { SinksService } from '../sinks/api/sinks.service.js';
import type { SinkView } from '../sinks/api/sink-view.js';
import { withDaemonContext } from './daemon-database.js';
import { exitCodeOf, SinkAnswer, SinkClient, SinkCommandError } from './sinks-client.js';

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

const validation = createValidationPipe();
/** Sinks per page read by `sinks list`. */
const LIST_PAGE = 100;

/** The sinks of the daemon's database, through the SinksService the API uses (the same checks, the same audit). */
class DirectSinkClient implements SinkClient {
  constructor(private readonly sinks: SinksService) {}

  async create(body: Record<string, unknown>): Promise<SinkAnswer> {
    const dto = (await validation.transform(body, { type: 'body', metatype: CreateSinkDto })) as CreateSinkDto;
    return this.sinks.create(dto, cliActor());
  }

  async all(): Promise<SinkView[]> {
    const data: SinkView[] = [];
    for await (const page of this.sinks.all({ limit: LIST_PAGE, order: 'created' })) data.push(...page);
    return data;
  }

  async startingWith(prefix: string): Promise<SinkView[]> {
    return (await this.sinks.list({ limit: 1000, order: 'created', q: prefix })).data;
  }

  get(id: string): Promise<SinkAnswer> {
    return this.sinks.get(id);
  }

  async replay(id: string, from: string): Promise<SinkAnswer> {
    const dto = (await validation.transform({ from }, { type: 'body', metatype: ReplaySinkDto })) as ReplaySinkDto;
    return this.sinks.replay(id, dto, cliActor());
  }

  remove(id: string): Promise<void> {
    return this.sinks.remove(id, cliActor());
  }
}

/** Runs `work` on the daemon's database; an AppError becomes a SinkCommandError with the API's exit code. */
export async function withDirectSinkClient(config: AppConfig, work: (client: SinkClient) => Promise<void>) {
  try {
    await withDaemonContext(
      config,
      (url) => SinkCommandsModule.register(config, url),
      (app) => work(new DirectSinkClient(app.get(SinksService))),
    );
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    const field = typeof error.extra.field === 'string' ? ` (${error.extra.field})` : '';
    throw new SinkCommandError(`${error.detail}${field}`, exitCodeOf(error.status));
  }
}

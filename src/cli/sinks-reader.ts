import type { AppConfig } from '../config/app-config.js';
import { SecretCipher } from '../common/secret-cipher.js';
import { toSinkView, SinkView } from '../sinks/api/sink-view.js';
import { SinkListing } from '../sinks/sink-listing.repository.js';
import { SinkRepository } from '../sinks/sink.repository.js';
import { withDaemonDataSource } from './daemon-database.js';
import { SinkAnswer, SinkClient, SinkCommandError } from './sinks-client.js';

/** Sinks read per statement by `sinks list`. */
const PAGE = 1000;
/** `sinks show` counts a sink's lag up to this many changes, as GET /api/v1/sinks/{id} does. */
const SHOW_LAG_CAP = 1_000_000;

/**
 * The reads of `sinks list` and `show` on the daemon's database: the sink repository and listing alone, on two
 * sessions, never migrating (a look only), without the Nest context the writes need.
 */
class SinkReader implements Pick<SinkClient, 'all' | 'startingWith' | 'get'> {
  constructor(
    private readonly repository: SinkRepository,
    private readonly listing: SinkListing,
    private readonly types: readonly string[],
  ) {}

  async all(): Promise<SinkView[]> {
    const data: SinkView[] = [];
    let after: { order: 'created'; createdAt: string; id: string } | undefined;
    for (;;) {
      const rows = await this.listing.page({ limit: PAGE, order: 'created', after });
      data.push(...(await this.views(rows.slice(0, PAGE).map(({ sink }) => sink))));
      if (rows.length <= PAGE) return data;
      after = rows[PAGE - 1].key as typeof after;
    }
  }

  async startingWith(prefix: string): Promise<SinkView[]> {
    const rows = await this.listing.page({ limit: PAGE, order: 'created', q: prefix });
    return this.views(rows.map(({ sink }) => sink));
  }

  async get(id: string): Promise<SinkAnswer> {
    const sink = await this.repository.find(id);
    if (sink === null) throw new SinkCommandError(`No sink ${id}.`, 1);
    const lag = await this.repository.lag(sink, sink.types ?? this.types, sink.ownerIds, SHOW_LAG_CAP);
    return { data: toSinkView(sink, { lag, capped: lag >= SHOW_LAG_CAP }, this.types) };
  }

  private async views(sinks: Awaited<ReturnType<SinkRepository['find']>>[]): Promise<SinkView[]> {
    const found = sinks.filter((sink) => sink !== null);
    const lags = await this.listing.lags(
      found.map((sink) => sink.id),
      this.types,
    );
    return found.map((sink) => toSinkView(sink, lags.get(sink.id) ?? { lag: 0, capped: false }, this.types));
  }
}

export async function withSinkReader<T>(
  config: AppConfig,
  work: (reader: Pick<SinkClient, 'all' | 'startingWith' | 'get'>) => Promise<T>,
): Promise<T> {
  const cipher = await SecretCipher.create(config);
  return withDaemonDataSource(
    config,
    2,
    async (dataSource) => {
      const repository = new SinkRepository(dataSource, cipher);
      try {
        return await work(new SinkReader(repository, new SinkListing(dataSource, cipher), config.changeTypes));
      } finally {
        await repository.onApplicationShutdown();
      }
    },
    { migrate: false },
  );
}

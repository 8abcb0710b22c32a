import type { AppConfig } from '../config/app-config.js';
import type { SinkView } from '../sinks/api/sink-view.js';

export type SinkAnswer = { data: SinkView & { secret?: string } };

/** What the sinks commands ask, of the daemon's database (sinks-context.ts) or of its API (MENU_SYNC_URL). */
export interface SinkClient {
  create(body: Record<string, unknown>): Promise<SinkAnswer>;
  /** Every sink, oldest first. */
  all(): Promise<SinkView[]>;
  /** The sinks whose id starts with `prefix` (at most a page; two are enough to be ambiguous). */
  startingWith(prefix: string): Promise<SinkView[]>;
  get(id: string): Promise<SinkAnswer>;
  replay(id: string, from: string): Promise<SinkAnswer>;
  remove(id: string): Promise<void>;
}

/** A failure the command reports on stderr with its exit code: 1 failure (unknown sink included), 2 bad usage. */
export class SinkCommandError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2,
  ) {
    super(message);
  }
}

const FULL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The one sink a full id or a unique prefix of one names (as git and docker take them). */
export async function resolveSinkId(
  client: { startingWith(prefix: string): Promise<ReadonlyArray<{ id: string }>> },
  given: string,
): Promise<string> {
  const prefix = given.toLowerCase();
  if (FULL_ID.test(prefix)) return prefix;
  if (!/^[0-9a-f-]{1,35}$/.test(prefix)) throw new SinkCommandError(`No sink ${given}.`, 1);
  const found = (await client.startingWith(prefix)).filter((sink) => sink.id.startsWith(prefix));
  if (found.length === 0) throw new SinkCommandError(`No sink ${given}.`, 1);
  if (found.length > 1)
    throw new SinkCommandError(
      `${given} is the start of ${found.length} sinks' ids (${found
        .slice(0, 5)
        .map((sink) => sink.id)
        .join(', ')}${found.length > 5 ? ', …' : ''}): give more of it.`,
      2,
    );
  return found[0].id;
}

/**
 * Runs `work` with the sinks of MENU_SYNC_URL's daemon when it is set, else of the daemon's
 * database (migrated first unless MIGRATIONS_RUN=false); a failure is printed on stderr and sets
 * the exit code: an unknown sink 1, input the API refuses (4XX other than 404) 2, anything else 1.
 */
export async function runSinkCommand(
  command: string,
  config: AppConfig,
  work: (client: SinkClient) => Promise<void>,
): Promise<void> {
  await handled(command, async () => {
    if (config.MENU_SYNC_URL !== undefined) {
      const { ApiSinkClient } = await import('./sinks-api-client.js');
      await work(ApiSinkClient.fromConfig(config));
    } else {
      const { withDirectSinkClient } = await import('./sinks-context.js');
      await withDirectSinkClient(config, work);
    }
  });
}

export type SinkReads = Pick<SinkClient, 'all' | 'startingWith' | 'get'>;

/** runSinkCommand for the reads (`list`, `show`): on the database, the sink repository alone, never migrating. */
export async function runSinkRead(
  command: string,
  config: AppConfig,
  work: (client: SinkReads) => Promise<void>,
): Promise<void> {
  if (config.MENU_SYNC_URL !== undefined) return runSinkCommand(command, config, work);
  await handled(command, async () => {
    const { withSinkReader } = await import('./sinks-reader.js');
    await withSinkReader(config, work);
  });
}

async function handled(command: string, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (!(error instanceof SinkCommandError)) throw error;
    process.stderr.write(`menu-sync sinks ${command}: ${error.message}\n`);
    process.exitCode = error.exitCode;
  }
}

/** The exit code of an answer's HTTP status (docs/reference.md §8). */
export function exitCodeOf(status: number): 1 | 2 {
  return status === 404 || status >= 500 || status === 0 || status === 401 || status === 403 ? 1 : 2;
}

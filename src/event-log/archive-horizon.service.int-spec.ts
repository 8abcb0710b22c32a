import { useDatabase } from '../../test/support/database.js';
import { eventually } from '../../test/support/eventually.js';
import { ArchivedError } from './archive-horizon.js';
import { ArchiveHorizonRepository } from './archive-horizon.repository.js';
import { ARCHIVE_CHANNEL, ArchiveHorizonService } from './archive-horizon.service.js';

/** The horizon each process keeps, against the real PostgreSQL and migrations (the trigger's NOTIFY). */
describe('ArchiveHorizonService', () => {
  const db = useDatabase(4);
  let service: ArchiveHorizonService;

  beforeAll(async () => {
    service = new ArchiveHorizonService(db.dataSource, new ArchiveHorizonRepository(db.dataSource));
    await service.onApplicationBootstrap();
    // Its LISTEN session opens in the background: a NOTIFY sent before it listens is not heard.
    await eventually(async () =>
      expect(
        await db.dataSource.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query = $1`,
          [`LISTEN ${ARCHIVE_CHANNEL}`],
        ),
      ).toEqual([{ n: 1 }]),
    );
  });
  afterAll(() => service.onApplicationShutdown());

  const row = (state: string, lower: number, upper: number, lastOccurredAt: string) =>
    db.dataSource.query(
      `INSERT INTO event_log_archives (partition_name, lower_bound, upper_bound, events, last_occurred_at, file, bytes,
              sha256, events_sha256, rows_sha256, state)
       VALUES ($1, $2, $3, 10, $4, $5, 2048, repeat('0', 64), repeat('0', 64), repeat('0', 64), $6)`,
      [`event_log_${lower}`, lower, upper, lastOccurredAt, `event_log_${lower}.ndjson.gz`, state],
    );
  const thrown = (check: () => void) => {
    try {
      check();
    } catch (error) {
      return error;
    }
    return undefined;
  };

  it('given nothing archived, every position and as_of passes', () => {
    expect(service.current.position).toBe(0);
    expect(thrown(() => service.checkPosition(1))).toBeUndefined();
    expect(thrown(() => service.checkAsOf(new Date(0)))).toBeUndefined();
  });

  it('an exported row changes nothing; an archived one is heard by NOTIFY, well before the poll', async () => {
    await row('archived', 1000, 2000, '2024-02-01T00:00:00Z');
    await row('exported', 2000, 3000, '2024-03-01T00:00:00Z');
    await eventually(async () => expect(service.current.position).toBe(2000), 3000);
    await service.refresh();
    expect([service.current.position, service.current.asOfBefore]).toEqual([2000, new Date('2024-02-01T00:00:00Z')]);
    const error = thrown(() => service.checkPosition(1500)) as ArchivedError;
    expect(error).toBeInstanceOf(ArchivedError);
    expect([error.status, error.code, error.extra]).toEqual([
      410,
      'archived',
      { archived_before: 2000, archive_file: 'event_log_1000.ndjson.gz' },
    ]);
    expect((thrown(() => service.checkAsOf(new Date('2024-01-31T00:00:00Z'))) as ArchivedError).extra).toEqual({
      archived_before: '2024-02-01T00:00:00.000Z',
      archive_file: 'event_log_1000.ndjson.gz',
    });
    expect(thrown(() => service.checkAsOf(new Date('2024-02-01T00:00:00Z')))).toBeUndefined();
    expect(thrown(() => service.checkPosition(2000))).toBeUndefined();
  });

  it('a range restored answers again once its row says so', async () => {
    await db.dataSource.query(`UPDATE event_log_archives SET state = 'restored' WHERE lower_bound = 1000`);
    await eventually(async () => expect(service.current.position).toBe(0), 3000);
    expect(thrown(() => service.checkPosition(1500))).toBeUndefined();
    expect(thrown(() => service.checkAsOf(new Date(0)))).toBeUndefined();
  });
});

import { randomUUID } from 'node:crypto';
import { useDatabase } from '../../test/support/database.js';
import { newLogEntry } from '../../test/support/event-log.js';
import { loadConfig } from '../config/app-config.js';
import { EventLogRepository } from './event-log.repository.js';
import { LogPartitionsService } from './log-partitions.service.js';
import type { NewLogEntry } from './log-entry.js';

function entry(ownerId: string | null = '42', occurredAt = '2024-05-01T10:00:00.000Z'): NewLogEntry {
  const eventId = randomUUID();
  return { ...newLogEntry({ eventId, eventType: 'product.updated', subjectId: '1', occurredAt, seq: 1 }), ownerId };
}

describe('the partitioned event log (PostgreSQL)', () => {
  const db = useDatabase();
  let repository: EventLogRepository;
  const partitionOf = async (position: number) =>
    (
      await db.dataSource.query(`SELECT tableoid::regclass::text AS name FROM event_log WHERE position = $1`, [
        position,
      ])
    )[0]?.name as string | undefined;
  const moveHeadTo = (position: number) =>
    db.dataSource.query(`SELECT setval('event_log_position_seq', $1)`, [position]);

  beforeAll(() => {
    repository = new EventLogRepository(db.dataSource);
  });
  afterAll(() => repository.close());

  it('starts with the first partition and the next one made, and appends land in the first', async () => {
    expect(await repository.partitions()).toEqual([
      { name: 'event_log_0', lower: null, upper: 1_000_000 },
      { name: 'event_log_1000000', lower: 1_000_000, upper: 2_000_000 },
    ]);
    const [first, second] = await repository.append([entry(), entry()]);
    expect([first.position, second.position]).toEqual([1, 2]);
    expect([await partitionOf(1), await partitionOf(2)]).toEqual(['event_log_0', 'event_log_0']);
  });

  it('makes a partition ahead once the head is within the margin, and none before', async () => {
    await moveHeadTo(1_400_000);
    expect(await repository.extend(500_000, 1_000_000)).toBe(2_000_000);
    expect((await repository.partitions()).map((p) => p.name)).toEqual(['event_log_0', 'event_log_1000000']);
    await moveHeadTo(1_999_990);
    expect(await repository.extend(500_000, 1_000_000)).toBe(3_000_000);
    expect((await repository.partitions()).at(-1)).toEqual({
      name: 'event_log_2000000',
      lower: 2_000_000,
      upper: 3_000_000,
    });
  });

  it('appends across a partition boundary, and answers a repeat from either side duplicate with its position', async () => {
    const batch = Array.from({ length: 20 }, () => entry());
    const results = await repository.append(batch);
    expect(results.map((r) => r.position)).toEqual(Array.from({ length: 20 }, (_, i) => 1_999_991 + i));
    const counts = await db.dataSource.query(
      `SELECT tableoid::regclass::text AS name, count(*)::int AS n FROM event_log WHERE position > 1999990
        GROUP BY 1 ORDER BY 1`,
    );
    expect(counts).toEqual([
      { name: 'event_log_1000000', n: 9 },
      { name: 'event_log_2000000', n: 11 },
    ]);
    const [first] = await db.dataSource.query(`SELECT event_id FROM event_log WHERE position = 1`);
    const again = await repository.append([
      { ...batch[19], payload: '{"other":true}' },
      { ...entry(), eventId: first.event_id },
      batch[0],
      entry(),
    ]);
    expect(again.map((r) => [r.position, r.inserted])).toEqual([
      [2_000_010, false],
      [1, false],
      [1_999_991, false],
      // Each repeat took a position it did not keep (as the identity column did).
      [2_000_014, true],
    ]);
    const [{ n }] = await db.dataSource.query(`SELECT count(*)::int AS n FROM event_log WHERE event_id = $1`, [
      batch[19].eventId,
    ]);
    expect(n).toBe(1);
  });

  it('makes the partition an append past the last bound needs, of the last size, and appends', async () => {
    await moveHeadTo(2_999_998);
    const results = await repository.append([entry(), entry(), entry()]);
    // The first try took 2,999,999 to 3,000,001 and was refused as a whole.
    expect(results.map((r) => [r.position, r.inserted])).toEqual([
      [3_000_002, true],
      [3_000_003, true],
      [3_000_004, true],
    ]);
    expect((await repository.partitions()).at(-1)).toEqual({
      name: 'event_log_3000000',
      lower: 3_000_000,
      upper: 4_000_000,
    });
    expect(await partitionOf(3_000_004)).toBe('event_log_3000000');
  });

  it("makes partitions ahead in the daemon's upkeep, of EVENT_LOG_PARTITION_SIZE, only in a process with ingress", async () => {
    await moveHeadTo(3_999_600);
    const apiOnly = new LogPartitionsService(
      repository,
      loadConfig({ EVENT_LOG_PARTITION_SIZE: '1000', ROLES: 'api' }),
    );
    apiOnly.onApplicationBootstrap();
    await apiOnly.beforeApplicationShutdown();
    expect((await repository.partitions()).at(-1)!.upper).toBe(4_000_000);
    const upkeep = new LogPartitionsService(repository, loadConfig({ EVENT_LOG_PARTITION_SIZE: '1000' }));
    await upkeep.run();
    expect((await repository.partitions()).at(-1)).toEqual({
      name: 'event_log_4000000',
      lower: 4_000_000,
      upper: 4_001_000,
    });
    await moveHeadTo(4_000_000);
    expect((await repository.append([entry()]))[0].position).toBe(4_000_001);
    expect(await partitionOf(4_000_001)).toBe('event_log_4000000');
  });

  it('refuses UPDATE, DELETE and TRUNCATE on the log and on every partition', async () => {
    const names = ['event_log', ...(await repository.partitions()).map((p) => p.name)];
    expect(names).toHaveLength(6);
    for (const name of names) {
      await expect(db.dataSource.query(`UPDATE ${name} SET event_type = 'x'`)).rejects.toThrow(/append-only: UPDATE/);
      await expect(db.dataSource.query(`DELETE FROM ${name}`)).rejects.toThrow(/append-only: DELETE/);
      await expect(db.dataSource.query(`TRUNCATE ${name}`)).rejects.toThrow(/append-only: TRUNCATE/);
    }
    const [{ n }] = await db.dataSource.query(`SELECT count(*)::int AS n FROM event_log`);
    expect(n).toBe(27);
  });

  it('answers the owners as a scan of the log does, before and after their counts are folded', async () => {
    await repository.append([
      entry('7', '2024-01-02T00:00:00.000Z'),
      entry('8', '2024-03-01T00:00:00.000Z'),
      entry(null),
    ]);
    const repeat = entry('7', '2023-12-31T00:00:00.000Z');
    await repository.append([repeat, entry('7', '2024-02-01T00:00:00.000Z')]);
    await repository.append([repeat, { ...repeat }]);
    const scan = async (ownerIds?: string[]) =>
      (
        await db.dataSource.query(
          `SELECT owner_id, count(*)::int AS events, min(occurred_at) AS first, max(occurred_at) AS last FROM event_log
            WHERE ${ownerIds === undefined ? 'owner_id IS NOT NULL' : 'owner_id = ANY($1::text[])'}
            GROUP BY owner_id ORDER BY count(*) DESC, owner_id`,
          ownerIds === undefined ? [] : [ownerIds],
        )
      ).map((row: { owner_id: string; events: number; first: Date; last: Date }) => ({
        ownerId: row.owner_id,
        events: row.events,
        first: row.first,
        last: row.last,
      }));
    const expected = [
      {
        ownerId: '42',
        events: 27,
        first: new Date('2024-05-01T10:00:00.000Z'),
        last: new Date('2024-05-01T10:00:00.000Z'),
      },
      {
        ownerId: '7',
        events: 3,
        first: new Date('2023-12-31T00:00:00.000Z'),
        last: new Date('2024-02-01T00:00:00.000Z'),
      },
      {
        ownerId: '8',
        events: 1,
        first: new Date('2024-03-01T00:00:00.000Z'),
        last: new Date('2024-03-01T00:00:00.000Z'),
      },
    ];
    expect(await scan()).toEqual(expected);
    expect(await repository.owners()).toEqual(expected);
    expect(await repository.owners(['8', '9'])).toEqual(await scan(['8', '9']));
    const rows = async () => (await db.dataSource.query(`SELECT count(*)::int AS n FROM event_log_owners`))[0].n;
    expect(await rows()).toBe(5);
    await repository.compactOwners();
    expect(await rows()).toBe(3);
    expect(await repository.owners()).toEqual(expected);
  });
});

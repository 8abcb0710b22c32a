import { useDatabase } from '../../test/support/database.js';
import { ActivityCounter } from './activity-counter.service.js';
import { ActivityRepository } from './activity.repository.js';
import { ActivityService } from './activity.service.js';

const MINUTE = Date.parse('2026-12-01T10:00:00Z');

async function insertChanges(db: { query: (sql: string, values?: unknown[]) => Promise<unknown> }, ids: string[]) {
  await db.query(
    `INSERT INTO change_log (change_id, type, id, owner_id, op, resource)
     SELECT 'product:' || id || ':1', 'product', id, '7', 'upsert',
            menu_sync_resource('product', id, '7', '{"name":"x"}', '{}', 'e-' || id, '2024-05-01T10:00:00Z', 1, false)
       FROM unnest($1::text[]) AS id`,
    [ids],
  );
}

describe('Activity history (PostgreSQL)', () => {
  const db = useDatabase(4);

  it('adds the counts of several processes to one row per minute, kind and key', async () => {
    const repository = new ActivityRepository(db.dataSource);
    const first = new ActivityCounter(repository);
    const second = new ActivityCounter(repository);
    for (let i = 0; i < 5; i += 1) first.add('events', 'webhook', 1, MINUTE + i * 1000);
    first.add('deliveries', 'http', 40, MINUTE + 30_000);
    first.add('failures', 'http', 1, MINUTE + 59_999);
    first.add('events', 'webhook', 1, MINUTE + 60_000);
    second.add('events', 'webhook', 2, MINUTE + 10_000);
    second.add('deliveries', 'nats', 3, MINUTE);
    second.add('deliveries', 'http', 0, MINUTE);
    await Promise.all([first.flush(), second.flush()]);
    await first.flush();

    const rows: Array<{ minute: Date; kind: string; key: string; count: string }> = await db.dataSource.query(
      `SELECT minute, kind, key, count::text FROM activity_minutes ORDER BY minute, kind, key`,
    );
    expect(rows.map((row) => [row.minute.toISOString(), row.kind, row.key, row.count])).toEqual([
      ['2026-12-01T10:00:00.000Z', 'deliveries', 'http', '40'],
      ['2026-12-01T10:00:00.000Z', 'deliveries', 'nats', '3'],
      ['2026-12-01T10:00:00.000Z', 'events', 'webhook', '7'],
      ['2026-12-01T10:00:00.000Z', 'failures', 'http', '1'],
      ['2026-12-01T10:01:00.000Z', 'events', 'webhook', '1'],
    ]);

    const answer = await new ActivityService(repository).series({
      since: new Date(MINUTE + 15_000),
      until: new Date(MINUTE + 2 * 60_000 + 5_000),
    });
    expect(answer).toEqual({
      since: '2026-12-01T10:00:00.000Z',
      until: '2026-12-01T10:02:05.000Z',
      minutes: [
        {
          minute: '2026-12-01T10:00:00.000Z',
          events: 7,
          changes: 0,
          deliveries: { http: 40, nats: 3 },
          failures: { http: 1 },
        },
        { minute: '2026-12-01T10:01:00.000Z', events: 1, changes: 0, deliveries: {}, failures: {} },
        { minute: '2026-12-01T10:02:00.000Z', events: 0, changes: 0, deliveries: {}, failures: {} },
      ],
    });
  });

  it('counts the changes a committed statement wrote, by connection, and none of a rolled-back one', async () => {
    await db.dataSource.query(`DELETE FROM activity_minutes`);
    await insertChanges(db.dataSource, ['a', 'b', 'c']);
    await insertChanges(db.dataSource, ['d']);
    await db.dataSource
      .transaction(async (manager) => {
        await insertChanges(manager, ['e', 'f']);
        throw new Error('rolled back');
      })
      .catch(() => undefined);
    const [{ changes }]: Array<{ changes: string }> = await db.dataSource.query(
      `SELECT sum(count)::text AS changes FROM activity_minutes WHERE kind = 'changes'`,
    );
    expect(changes).toBe('4');
    const now = new Date();
    const answer = await new ActivityService(new ActivityRepository(db.dataSource)).series({
      since: new Date(now.getTime() - 60_000),
      until: now,
    });
    expect(answer.minutes.reduce((sum, minute) => sum + minute.changes, 0)).toBe(4);
  });

  it('keeps the counts of a flush that failed for the next one, and writes them once', async () => {
    const repository = new ActivityRepository(db.dataSource);
    await db.dataSource.query(`DELETE FROM activity_minutes`);
    const counter = new ActivityCounter(repository);
    counter.add('failures', 'webhook', 2, MINUTE);
    await db.dataSource.query(`ALTER TABLE activity_minutes RENAME TO activity_minutes_away`);
    try {
      await counter.flush();
    } finally {
      await db.dataSource.query(`ALTER TABLE activity_minutes_away RENAME TO activity_minutes`);
    }
    counter.add('failures', 'webhook', 1, MINUTE);
    await counter.flush();
    await counter.flush();
    const rows: Array<{ count: string }> = await db.dataSource.query(`SELECT count::text FROM activity_minutes`);
    expect(rows).toEqual([{ count: '3' }]);
  });

  it('deletes the minutes older than the cutoff only', async () => {
    const repository = new ActivityRepository(db.dataSource);
    await db.dataSource.query(`DELETE FROM activity_minutes`);
    const counter = new ActivityCounter(repository);
    counter.add('events', 'webhook', 1, MINUTE);
    counter.add('events', 'webhook', 1, MINUTE + 60_000);
    await counter.flush();
    expect(await repository.prune(new Date(MINUTE + 60_000))).toBe(1);
    const rows: Array<{ minute: Date }> = await db.dataSource.query(`SELECT minute FROM activity_minutes`);
    expect(rows.map((row) => row.minute.toISOString())).toEqual(['2026-12-01T10:01:00.000Z']);
  });
});

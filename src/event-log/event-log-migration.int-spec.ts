import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { MIGRATIONS } from '../../migrations/index.js';
import { TEST_SERVER_URL } from '../../test/support/database.js';
import { newLogEntry } from '../../test/support/event-log.js';
import { dataSourceOptions } from '../database/data-source.factory.js';
import { EventLogRepository } from './event-log.repository.js';

const ENTRIES = 20_000;
const PARTITIONING = MIGRATIONS.findIndex((migration) => migration.name === 'PartitionedEventLog1766800000000');

/** Every entry of the log, in position order, as one digest (every column but the transaction id). */
const DIGEST = `SELECT count(*)::int AS n, md5(string_agg(
    concat_ws('|', position, event_id, event_type, subject_type, subject_id, owner_id, occurred_at, event_seq, source,
              handled, received_at, key_id, content_type, payload::text, raw_body, raw_sealed, raw_key, raw_key_at, sha256),
    E'\\n' ORDER BY position)) AS digest FROM event_log`;

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_SERVER_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

describe('the migration to a partitioned event log, on a log that has entries (PostgreSQL)', () => {
  const name = `menu_sync_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = Object.assign(new URL(TEST_SERVER_URL), { pathname: `/${name}` }).toString();
  let dataSource: DataSource;
  let before: { n: number; digest: string; filenode: string };

  beforeAll(async () => {
    await admin(`CREATE DATABASE ${name} ENCODING 'UTF8' TEMPLATE template0`);
    const earlier = new DataSource({
      ...dataSourceOptions({ url, poolSize: 2 }),
      migrations: MIGRATIONS.slice(0, PARTITIONING),
    });
    await earlier.initialize();
    await earlier.runMigrations({ transaction: 'each' });
    await earlier.query(
      `INSERT INTO event_log (event_id, event_type, subject_type, subject_id, owner_id, occurred_at, event_seq, source,
                              handled, received_at, payload, sha256)
       SELECT 'e-' || i, 'product.updated', 'product', (i % 97)::text, CASE WHEN i % 10 = 0 THEN NULL ELSE (i % 3)::text END,
              timestamptz '2024-01-01' + i * interval '1 minute', i, 'webhook', true, now(),
              json_build_object('n', i), sha256(int8send(i))
         FROM generate_series(1, ${ENTRIES}) AS i`,
    );
    const [digest] = await earlier.query(DIGEST);
    const [{ filenode }] = await earlier.query(`SELECT pg_relation_filenode('event_log')::text AS filenode`);
    before = { ...digest, filenode };
    await earlier.destroy();
    dataSource = new DataSource(dataSourceOptions({ url, poolSize: 4 }));
    await dataSource.initialize();
    await dataSource.runMigrations({ transaction: 'each' });
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });

  it('keeps every entry where it was: the old table, unrewritten, is the first partition with its indexes', async () => {
    const [after] = await dataSource.query(DIGEST);
    expect(after).toEqual({ n: ENTRIES, digest: before.digest });
    const [{ filenode }] = await dataSource.query(`SELECT pg_relation_filenode('event_log_0')::text AS filenode`);
    expect(filenode).toBe(before.filenode);
    const partitions = await dataSource.query(
      `SELECT partition::text AS name, lower, upper FROM event_log_partitions()`,
    );
    expect(partitions).toEqual([
      { name: 'event_log_0', lower: null, upper: '1000000' },
      { name: 'event_log_1000000', lower: '1000000', upper: '2000000' },
    ]);
    const indexes = await dataSource.query(
      `SELECT indexrelid::regclass::text AS name FROM pg_index WHERE indrelid = 'event_log_0'::regclass ORDER BY 1`,
    );
    expect(indexes.map((row: { name: string }) => row.name)).toEqual([
      'event_log_0_occurred_idx',
      'event_log_0_order_events_idx',
      'event_log_0_owner_position_idx',
      'event_log_0_pkey',
      'event_log_0_subject_idx',
      'event_log_0_subject_version_idx',
      'event_log_0_transaction_position_idx',
    ]);
  });

  it('knows every event id with its position, and each owner as the scan of the log does', async () => {
    const [ids] = await dataSource.query(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE i.position = e.position)::int AS same
         FROM event_ids i LEFT JOIN event_log e USING (event_id)`,
    );
    expect(ids).toEqual({ n: ENTRIES, same: ENTRIES });
    const scan = await dataSource.query(
      `SELECT owner_id, count(*)::int AS events, min(occurred_at) AS first, max(occurred_at) AS last
         FROM event_log WHERE owner_id IS NOT NULL GROUP BY owner_id ORDER BY count(*) DESC, owner_id`,
    );
    expect(scan.map((row: { events: number }) => row.events)).toEqual([6000, 6000, 6000]);
    const repository = new EventLogRepository(dataSource);
    try {
      expect(await repository.owners()).toEqual(
        scan.map((row: { owner_id: string; events: number; first: Date; last: Date }) => ({
          ownerId: row.owner_id,
          events: row.events,
          first: row.first,
          last: row.last,
        })),
      );
      const again = newLogEntry({
        eventId: 'e-17',
        eventType: 'product.updated',
        subjectId: '1',
        occurredAt: '2025-01-01T00:00:00Z',
        seq: 1,
      });
      const fresh = newLogEntry({
        eventId: 'new-1',
        eventType: 'product.updated',
        subjectId: '1',
        occurredAt: '2025-01-01T00:00:00Z',
        seq: 1,
      });
      const results = await repository.append([again, fresh]);
      // The repeat took a position it did not keep, as the identity column did.
      expect(results.map((r) => [r.position, r.inserted])).toEqual([
        [17, false],
        [ENTRIES + 2, true],
      ]);
      await dataSource.query(`SELECT setval('event_log_position_seq', 1000000)`);
      const [past] = await repository.append([{ ...fresh, eventId: 'new-2' }]);
      expect(past.position).toBe(1_000_001);
      const [{ partition }] = await dataSource.query(
        `SELECT tableoid::regclass::text AS partition FROM event_log WHERE event_id = 'new-2'`,
      );
      expect(partition).toBe('event_log_1000000');
    } finally {
      await repository.close();
    }
  });

  it('refuses UPDATE, DELETE and TRUNCATE on every partition', async () => {
    for (const table of ['event_log', 'event_log_0', 'event_log_1000000']) {
      await expect(dataSource.query(`UPDATE ${table} SET event_type = 'x'`)).rejects.toThrow(/append-only: UPDATE/);
      await expect(dataSource.query(`DELETE FROM ${table}`)).rejects.toThrow(/append-only: DELETE/);
      await expect(dataSource.query(`TRUNCATE ${table}`)).rejects.toThrow(/append-only: TRUNCATE/);
    }
    const [{ n }] = await dataSource.query(`SELECT count(*)::int AS n FROM event_log_1000000`);
    expect(n).toBe(1);
  });
});

describe('an append of this version, before and after the migration to a partitioned log (PostgreSQL)', () => {
  const name = `menu_sync_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = Object.assign(new URL(TEST_SERVER_URL), { pathname: `/${name}` }).toString();
  let dataSource: DataSource | undefined;

  afterAll(async () => {
    await dataSource?.destroy();
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });

  it('appends to the unpartitioned log, then, once migrated, to the partitioned one, repeats of either answered with their position', async () => {
    await admin(`CREATE DATABASE ${name} ENCODING 'UTF8' TEMPLATE template0`);
    const earlier = new DataSource({
      ...dataSourceOptions({ url, poolSize: 2 }),
      migrations: MIGRATIONS.slice(0, PARTITIONING),
    });
    await earlier.initialize();
    await earlier.runMigrations({ transaction: 'each' });
    await earlier.destroy();
    dataSource = new DataSource(dataSourceOptions({ url, poolSize: 2 }));
    await dataSource.initialize();
    const entry = (eventId: string) =>
      newLogEntry({
        eventId,
        eventType: 'product.updated',
        subjectId: '1',
        occurredAt: '2025-01-01T00:00:00Z',
        seq: 1,
      });
    const repository = new EventLogRepository(dataSource);
    const before = await repository.append([entry('a'), entry('b'), entry('a')]);
    expect(before.map((r) => [r.position, r.inserted])).toEqual([
      [1, true],
      [2, true],
      [1, false],
    ]);
    expect((await dataSource.query(`SELECT to_regclass('event_ids') AS t`))[0].t).toBeNull();

    await dataSource.runMigrations({ transaction: 'each' });
    // The same repository, which found the unpartitioned log: its statement is refused (no unique
    // key on event_id left), it looks again and appends to the partitioned log.
    const after = await repository.append([entry('a'), entry('c'), entry('b')]);
    expect(after.map((r) => [r.position, r.inserted])).toEqual([
      [1, false],
      [4, true],
      [2, false],
    ]);
    const rows = await dataSource.query(
      `SELECT e.event_id, e.position::int AS position, i.position::int AS claimed, e.tableoid::regclass::text AS partition
         FROM event_log e JOIN event_ids i USING (event_id) ORDER BY e.position`,
    );
    expect(rows).toEqual([
      { event_id: 'a', position: 1, claimed: 1, partition: 'event_log_0' },
      { event_id: 'b', position: 2, claimed: 2, partition: 'event_log_0' },
      { event_id: 'c', position: 4, claimed: 4, partition: 'event_log_0' },
    ]);
  });
});

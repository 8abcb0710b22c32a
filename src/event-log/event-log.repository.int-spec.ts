import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource, TEST_SERVER_URL, TestDatabase } from '../../test/support/database.js';
import { newLogEntry } from '../../test/support/event-log.js';
import { EventLogRepository } from './event-log.repository.js';
import { LOG_START, LogCheckpoint, NewLogEntry } from './log-entry.js';

function entry(eventId: string = randomUUID()): NewLogEntry {
  return newLogEntry({
    eventId,
    eventType: 'product.updated',
    subjectId: '1',
    occurredAt: '2024-05-01T10:00:00.000Z',
    seq: 1,
    payload: JSON.stringify({ data: { id: eventId } }),
  });
}

describe('EventLogRepository (PostgreSQL)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let repository: EventLogRepository;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource(database.url, 60);
    repository = new EventLogRepository(dataSource);
  });

  afterAll(async () => {
    await repository.close();
    await dataSource.destroy();
    await database.drop();
  });

  it('appends once and reports the original position for every repeat, even in the same batch', async () => {
    const first = entry();
    const [accepted] = await repository.append([first]);
    expect(accepted.inserted).toBe(true);
    const repeats = await repository.append([first, { ...first, payload: '{"other":true}' }, entry()]);
    expect(repeats.map((r) => [r.position, r.inserted])).toEqual([
      [accepted.position, false],
      [accepted.position, false],
      [expect.any(Number), true],
    ]);
    const inBatch = entry();
    const twice = await repository.append([inBatch, inBatch]);
    expect(twice[0]).toMatchObject({ inserted: true });
    expect(twice[1]).toMatchObject({ inserted: false, position: twice[0].position });
  });

  it('gives exactly one insert among 50 concurrent appends of one event', async () => {
    const same = entry();
    const results = await Promise.all(Array.from({ length: 50 }, () => repository.append([same])));
    const flat = results.flat();
    expect(flat.filter((r) => r.inserted)).toHaveLength(1);
    expect(new Set(flat.map((r) => r.position)).size).toBe(1);
  });

  it('rejects UPDATE, DELETE and TRUNCATE in the database itself', async () => {
    await repository.append([entry()]);
    await expect(dataSource.query(`UPDATE event_log SET event_type = 'x'`)).rejects.toThrow(/append-only/);
    await expect(dataSource.query(`DELETE FROM event_log`)).rejects.toThrow(/append-only/);
    await expect(dataSource.query(`TRUNCATE event_log`)).rejects.toThrow(/append-only/);
    const [{ count }] = await dataSource.query(`SELECT count(*)::int AS count FROM event_log WHERE event_type = 'x'`);
    expect(count).toBe(0);
  });

  it('keeps the exact bytes: raw_body only when they differ from the payload text', async () => {
    const withBom = entry();
    const raw = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(withBom.payload)]);
    const [result] = await repository.append([{ ...withBom, rawBody: raw }]);
    expect((await repository.findByPosition(result.position))!.raw.equals(raw)).toBe(true);
    const plain = entry();
    const [second] = await repository.append([plain]);
    expect((await repository.findByPosition(second.position))!.raw.toString()).toBe(plain.payload);
  });

  it('stores payloads given as their UTF-8 bytes as it stores their text, in one batch with others', async () => {
    const text = '{"data":{"id":"é€😀","nested":[1,{"a":"\\u0000"}]},"t":"x"}';
    const asBytes = { ...entry(), payload: text, payloadUtf8: Buffer.from(text) };
    const asText = { ...entry(), payload: text };
    const results = await repository.append([asBytes, asText, entry()]);
    const stored = await Promise.all(results.map((result) => repository.findByPosition(result.position)));
    expect(stored.slice(0, 2).map((row) => [row!.payload, row!.raw.toString()])).toEqual([
      [text, text],
      [text, text],
    ]);
  });

  it('keeps sealed bytes as given, marked sealed, and refuses a row marked sealed without them', async () => {
    const sealed = entry();
    const bytes = randomBytes(64);
    const [result] = await repository.append([{ ...sealed, rawBody: bytes, rawSealed: true }]);
    const found = (await repository.findByPosition(result.position))!;
    expect(found.rawSealed).toBe(true);
    expect(found.raw.equals(bytes)).toBe(true);
    expect((await repository.findByPosition((await repository.append([entry()]))[0].position))!.rawSealed).toBe(false);
    await expect(repository.append([{ ...entry(), rawSealed: true }])).rejects.toThrow(/event_log_raw_sealed_check/);
  });

  it('keeps a sealed key with the offsets it stood at (an array per row), and refuses one without the other', async () => {
    const sealedKey = randomBytes(40);
    const [one, two] = await repository.append([
      { ...entry(), rawKey: sealedKey, rawKeyAt: [12, 345] },
      { ...entry(), rawKey: sealedKey, rawKeyAt: [7] },
    ]);
    const first = (await repository.findByPosition(one.position))!;
    expect({ key: first.rawKey!.equals(sealedKey), at: first.rawKeyAt }).toEqual({ key: true, at: [12, 345] });
    expect((await repository.findByPosition(two.position))!.rawKeyAt).toEqual([7]);
    await expect(repository.append([{ ...entry(), rawKey: sealedKey }])).rejects.toThrow(/event_log_raw_key_check/);
  });

  it("event_log_horizon() stops at this database's oldest transaction in progress, not at another database's", async () => {
    const horizon = async () => BigInt((await dataSource.query(`SELECT event_log_horizon()::text AS h`))[0].h);
    const xidOf = async (query: (sql: string) => Promise<Array<{ xid: string }>>) =>
      BigInt((await query(`SELECT pg_current_xact_id()::text AS xid`))[0].xid);
    const elsewhere = new pg.Client({ connectionString: TEST_SERVER_URL });
    await elsewhere.connect();
    const here = dataSource.createQueryRunner();
    try {
      await elsewhere.query('BEGIN');
      const otherXid = await xidOf(async (sql) => (await elsewhere.query(sql)).rows);
      await here.startTransaction();
      const ownXid = await xidOf((sql) => here.query(sql));
      // A later transaction that commits, so that both open ones are below the snapshot's xmax (at or
      // above it, the horizon is xmax: lower than both, safe, and not what is tested here).
      await xidOf((sql) => dataSource.query(sql));
      // Twice: the second call runs the plan the first one kept for the session. A transaction of
      // another database that ends during a read holds that one read back (lower: safe), so the
      // pair is read again until neither read met one; no read is ever above this one's xid.
      let pair = [await horizon(), await horizon()];
      for (let tries = 1; tries < 20 && pair.some((h) => h !== ownXid); tries++) {
        expect(pair.every((h) => h <= ownXid)).toBe(true);
        pair = [await horizon(), await horizon()];
      }
      expect(pair).toEqual([ownXid, ownXid]);
      await here.commitTransaction();
      const after = await horizon();
      expect(after > ownXid && after > otherXid).toBe(true);
    } finally {
      if (here.isTransactionActive) await here.rollbackTransaction();
      await here.release();
      await elsewhere.end();
    }
  });

  describe('readAfter, with writers committing out of order', () => {
    async function drain(checkpoint: LogCheckpoint, seen: string[]): Promise<LogCheckpoint> {
      for (;;) {
        const page = await repository.readAfter(checkpoint, 7);
        seen.push(...page.entries.map((e) => e.eventId));
        if (page.entries.length === 0) return checkpoint;
        checkpoint = page.checkpoint;
      }
    }

    /** Each writer holds its transaction open for a random time after inserting, so commits reorder. */
    async function delayedWriter(ids: string[]): Promise<void> {
      const runner = dataSource.createQueryRunner();
      await runner.connect();
      try {
        for (const id of ids) {
          await runner.startTransaction();
          const e = entry(id);
          await runner.query(
            `INSERT INTO event_log (event_id, event_type, subject_type, subject_id, occurred_at, source, handled,
               received_at, payload, sha256) VALUES ($1, $2, $3, $4, $5, 'webhook', true, now(), $6, $7)`,
            [e.eventId, e.eventType, e.subjectType, e.subjectId, e.occurredAt, e.payload, e.sha256],
          );
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 15));
          await runner.commitTransaction();
        }
      } finally {
        await runner.release();
      }
    }

    // The reader's checkpoint carries over from round to round, as a projector's does.
    let checkpoint: LogCheckpoint = LOG_START;

    /**
     * Open transactions anywhere in the cluster (other test databases too) hold a gap-safe reader
     * back, so the reader keeps reading until it has seen this round's entries, within a deadline.
     */
    it.each(Array.from({ length: 20 }, (_, round) => round))('sees every entry exactly once (round %i)', async () => {
      const written = Array.from({ length: 20 }, () => Array.from({ length: 10 }, () => randomUUID()));
      const expected = new Set<string>(written.flat());
      const seen: string[] = [];
      const ofRound = () => seen.filter((id) => expected.has(id));
      let writing = true;
      const reader = (async () => {
        const deadline = Date.now() + 30000;
        while (writing || (ofRound().length < expected.size && Date.now() < deadline)) {
          checkpoint = await drain(checkpoint, seen);
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      })();
      await Promise.all(written.map(delayedWriter));
      writing = false;
      await reader;
      expect(ofRound()).toHaveLength(expected.size);
      expect(new Set(ofRound())).toEqual(expected);
    });
  });
});

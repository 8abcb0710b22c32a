import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource, TestDatabase } from '../../../test/support/database.js';
import { loadConfig } from '../../config/app-config.js';
import { SinkAttempt, SinkAttemptsRepository } from './sink-attempts.repository.js';
import { SinkAttemptsService } from './sink-attempts.service.js';

const DAY = 86_400_000;

async function newSink(dataSource: DataSource): Promise<string> {
  const id = randomUUID();
  await dataSource.query(
    `INSERT INTO sinks (id, kind, url, secret) VALUES ($1, 'http', 'http://127.0.0.1:9/x', '\\x00')`,
    [id],
  );
  return id;
}

function attempt(sinkId: string, n: number, at: Date, overrides: Partial<SinkAttempt> = {}): SinkAttempt {
  return {
    sinkId,
    at,
    firstSeq: n * 10 + 1,
    lastSeq: n * 10 + 10,
    changes: 10,
    webhookId: `msg_${n}`,
    outcome: 'ok',
    status: 200,
    durationMs: n,
    error: null,
    response: `answer ${n}`,
    ...overrides,
  };
}

describe('SinkAttemptsRepository (PostgreSQL, real migrations)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let repository: SinkAttemptsRepository;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource(database.url, 4);
    repository = new SinkAttemptsRepository(dataSource);
  });

  afterAll(async () => {
    await dataSource.destroy();
    await database.drop();
  });

  const ids = async (sinkId: string) =>
    (
      await dataSource.query(`SELECT webhook_id FROM menu_sync_sink_attempts WHERE sink_id = $1 ORDER BY id`, [sinkId])
    ).map((row: { webhook_id: string }) => row.webhook_id);

  it('pages newest first, keeps numeric and string statuses apart, and drops the attempts of a deleted sink', async () => {
    const sink = await newSink(dataSource);
    const now = new Date();
    await repository.insert([
      attempt(sink, 1, now),
      attempt(sink, 2, now, { outcome: 'retry', status: 0, error: 'no answer within 100 ms', response: null }),
      attempt(sink, 3, now, { outcome: 'retry', status: '23505', error: 'duplicate key', response: null }),
    ]);
    const notBefore = new Date(now.getTime() - DAY);
    const first = await repository.page(sink, { limit: 2, notBefore });
    expect(first.map((row) => row.webhook_id)).toEqual(['msg_3', 'msg_2', 'msg_1']);
    expect(first[0]).toMatchObject({
      at: now.toISOString(),
      batch: { first_seq: 31, last_seq: 40, changes: 10 },
      outcome: 'retry',
      status: '23505',
      duration_ms: 3,
      error: 'duplicate key',
      response: null,
    });
    expect(first[1].status).toBe(0);
    expect(first[2].status).toBe(200);
    const rest = await repository.page(sink, { limit: 2, before: first[1].id, notBefore });
    expect(rest.map((row) => row.webhook_id)).toEqual(['msg_1']);
    expect(await repository.page(sink, { limit: 5, notBefore: new Date(now.getTime() + 1) })).toEqual([]);

    const gone = randomUUID();
    await repository.insert([attempt(gone, 9, now), attempt(sink, 4, now)]);
    expect(await ids(sink)).toEqual(['msg_1', 'msg_2', 'msg_3', 'msg_4']);
    expect(await repository.sinkExists(gone)).toBe(false);

    await dataSource.query(`DELETE FROM sinks WHERE id = $1`, [sink]);
    expect(await ids(sink)).toEqual([]);
  });

  it('prunes in one statement what is older than the retention and what lies beyond the newest 1,000 of each sink', async () => {
    const busy = await newSink(dataSource);
    const quiet = await newSink(dataSource);
    const now = Date.now();
    const cutoff = new Date(now - 7 * DAY);
    // The busy sink: 1,005 recent attempts; the quiet one: two older than the cutoff, one newer.
    await repository.insert(Array.from({ length: 1005 }, (_, n) => attempt(busy, n, new Date(now - 1000 + n))));
    await repository.insert([
      attempt(quiet, 1, new Date(now - 9 * DAY)),
      attempt(quiet, 2, new Date(cutoff.getTime() - 1)),
      attempt(quiet, 3, new Date(cutoff.getTime() + 1)),
    ]);

    expect(await repository.page(busy, { limit: 1000, notBefore: cutoff })).toHaveLength(1000);
    expect((await repository.page(busy, { limit: 1000, notBefore: cutoff })).at(-1)!.webhook_id).toBe('msg_5');

    expect(await repository.prune(cutoff)).toBe(5 + 2);
    const busyLeft = await ids(busy);
    expect(busyLeft).toHaveLength(1000);
    expect(busyLeft[0]).toBe('msg_5');
    expect(busyLeft.at(-1)).toBe('msg_1004');
    expect(await ids(quiet)).toEqual(['msg_3']);
    expect(await repository.prune(cutoff)).toBe(0);

    expect(await repository.prune(cutoff, 2)).toBe(998);
    expect(await ids(busy)).toEqual(['msg_1003', 'msg_1004']);
    expect(await ids(quiet)).toEqual(['msg_3']);
  });

  it('records in the background with secrets redacted, and keeps what SINK_ATTEMPTS_RETENTION says', async () => {
    const sink = await newSink(dataSource);
    const service = new SinkAttemptsService(repository, loadConfig({ SINK_ATTEMPTS_RETENTION: '1h' }));
    const now = Date.now();
    const head = '{"echo":"whsec_c2VjcmV0","auth":"Bearer abc"}';
    service.record(attempt(sink, 1, new Date(now - 2 * 3_600_000)));
    service.record(
      attempt(sink, 2, new Date(now), {
        outcome: 'retry',
        status: 401,
        error: 'refused password=hunter2',
        response: `${head}${'x'.repeat(2000)}`,
      }),
    );
    await service.flush();
    expect(await ids(sink)).toEqual(['msg_1', 'msg_2']);

    const page = await service.page(sink, { limit: 10 });
    expect(page.next_cursor).toBeNull();
    expect(page.data).toHaveLength(1);
    expect(page.data[0]).toMatchObject({ webhook_id: 'msg_2', status: 401, error: 'refused password=[REDACTED]' });
    // The first KiB is kept, then redacted.
    expect(page.data[0].response).toBe(
      `{"echo":"whsec_[REDACTED]","auth":"Bearer [REDACTED]"}${'x'.repeat(1024 - head.length)}`,
    );

    await service.prune();
    expect(await ids(sink)).toEqual(['msg_2']);
  });
});

import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { useDatabase } from '../../test/support/database.js';
import { newLogEntry } from '../../test/support/event-log.js';
import { catchUp } from '../../test/support/projection.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import { PROJECTIONS } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { readManifest } from './archive-manifest.js';
import { ArchiveService, verifyArchive } from './archive.service.js';

const FIRST = 2_000_000;
const EVENTS = 2500;

/** Entries of every shape a column can take: raw bodies, keys, sealed bodies, odd payload text, no seq. */
function entries() {
  return Array.from({ length: EVENTS }, (_, i) => {
    const entry = newLogEntry({
      eventId: `archive-${i}`,
      eventType: i % 5 === 0 ? 'product.updated' : 'order.updated',
      subjectId: String(i % 97),
      occurredAt: new Date(Date.UTC(2024, 0, 1, 0, 0, i)).toISOString(),
      seq: i % 11 === 0 ? null : i,
      payload: i % 7 === 0 ? `{"data": {"id": "archive-${i}",\n  "x": "\\u0000\\ud800 é"}}` : undefined,
    });
    if (i % 13 === 0) return { ...entry, rawBody: randomBytes(64), rawSealed: true };
    if (i % 17 === 0)
      return { ...entry, rawBody: Buffer.from(`\ufeff${entry.payload}`), rawKey: randomBytes(44), rawKeyAt: [3, 90] };
    return entry;
  });
}

/** Every column of every entry, as PostgreSQL writes it, by position. */
async function snapshot(query: (sql: string) => Promise<Array<{ position: string; row: string }>>) {
  const rows = await query(
    `SELECT position::text AS position, row_to_json(e)::text AS row FROM event_log e ORDER BY position`,
  );
  return rows.map((row) => `${row.position} ${row.row}`);
}

describe('the event log archive (PostgreSQL)', () => {
  const db = useDatabase(4);
  let directory: string;

  beforeAll(async () => {
    directory = await mkdtemp(path.join(tmpdir(), 'menu-sync-archive-'));
    await db.dataSource.query(`SELECT setval('event_log_position_seq', ${FIRST - 1})`);
    await db.dataSource.query(`SELECT event_log_extend(${EVENTS}, 1000)`);
    await new EventLogRepository(db.dataSource).append(entries());
    await db.dataSource.query(`SELECT event_log_extend(1000, 1000)`);
    const runner = db.dataSource.createQueryRunner();
    await runner.connect();
    try {
      const projections = new ProjectionRepository();
      await projections.prepareLane(runner);
      await catchUp(projections, runner, PROJECTIONS, 500, EVENTS);
    } finally {
      await runner.release();
    }
  });
  afterAll(() => rm(directory, { recursive: true, force: true }));

  it('archives closed partitions to files and a manifest, verifies them, and restores them byte for byte', async () => {
    const before = await snapshot((sql) => db.dataSource.query(sql));
    const service = new ArchiveService(db.dataSource, directory);

    const archived = await service.archive({ position: FIRST + 2000 });
    expect(archived.map(({ partition, lower, upper, events }) => ({ partition, lower, upper, events }))).toEqual([
      { partition: 'event_log_0', lower: 0, upper: 1_000_000, events: 0 },
      { partition: 'event_log_1000000', lower: 1_000_000, upper: 2_000_000, events: 0 },
      { partition: 'event_log_2000000', lower: FIRST, upper: FIRST + 1000, events: 1000 },
      { partition: 'event_log_2001000', lower: FIRST + 1000, upper: FIRST + 2000, events: 1000 },
    ]);
    const [{ n }] = await db.dataSource.query(`SELECT count(*)::int AS n FROM event_log`);
    expect(n).toBe(EVENTS - 2000);
    const partitions = await db.dataSource.query(`SELECT partition::text AS name FROM event_log_partitions()`);
    expect(partitions.map((row: { name: string }) => row.name).slice(0, 1)).toEqual(['event_log_2002000']);

    const manifest = await readManifest(directory);
    expect(manifest.horizon).toBe(FIRST + 2000);
    expect(
      manifest.files.map((file) => [file.file, file.state, file.events, file.first_position, file.last_position]),
    ).toEqual([
      ['event_log_0-1000000.ndjson.br', 'archived', 0, null, null],
      ['event_log_1000000-2000000.ndjson.br', 'archived', 0, null, null],
      ['event_log_2000000-2001000.ndjson.br', 'archived', 1000, FIRST, FIRST + 999],
      ['event_log_2001000-2002000.ndjson.br', 'archived', 1000, FIRST + 1000, FIRST + 1999],
    ]);
    for (const file of manifest.files) expect(Object.keys(file.checkpoints).sort()).toEqual(['menu', 'orders']);
    expect((await readdir(directory)).sort()).toEqual(
      [...manifest.files.map((file) => file.file), 'manifest.json'].sort(),
    );
    expect(await verifyArchive(directory)).toEqual([]);

    // Duplicates are still recognised: event_ids keeps every id with its position.
    const again = await new EventLogRepository(db.dataSource).append([entries()[5]]);
    expect(again).toEqual([expect.objectContaining({ position: FIRST + 5 })]);

    const restored = await service.restore(FIRST, FIRST + 1999);
    expect(restored.map((row) => row.partition)).toEqual(['event_log_2000000', 'event_log_2001000']);
    expect(await snapshot((sql) => db.dataSource.query(sql))).toEqual(before);
    const states = await db.dataSource.query(
      `SELECT partition_name, state FROM event_log_archives ORDER BY lower_bound`,
    );
    expect(states.map((row: { state: string }) => row.state)).toEqual(['archived', 'archived', 'restored', 'restored']);

    // Archived again, the restored partitions leave the same files.
    const files = await Promise.all(manifest.files.slice(2).map((file) => readFile(path.join(directory, file.file))));
    expect((await service.archive({ position: FIRST + 2000 })).map((one) => one.partition)).toEqual([
      'event_log_2000000',
      'event_log_2001000',
    ]);
    const rewritten = await Promise.all(
      manifest.files.slice(2).map((file) => readFile(path.join(directory, file.file))),
    );
    expect(rewritten).toEqual(files);
  });

  it('verify names a file that differs from its manifest entry; a restore from it is refused and leaves nothing', async () => {
    const target = path.join(directory, 'event_log_2000000-2001000.ndjson.br');
    const bytes = await readFile(target);
    bytes[bytes.length >> 1] ^= 0xff;
    await writeFile(target, bytes);
    const problems = await verifyArchive(directory);
    expect(problems.map((problem) => problem.file)).toEqual(['event_log_2000000-2001000.ndjson.br']);

    // A restore from it is refused: the partition stays archived, not attached.
    await expect(new ArchiveService(db.dataSource, directory).restore(FIRST, FIRST)).rejects.toThrow(
      'event_log_2000000-2001000.ndjson.br: ',
    );
    const [row] = await db.dataSource.query(`SELECT state FROM event_log_archives WHERE lower_bound = $1`, [FIRST]);
    expect(row.state).toBe('archived');
    const partitions = await db.dataSource.query(`SELECT partition::text AS name FROM event_log_partitions()`);
    expect(partitions.map((one: { name: string }) => one.name)).not.toContain('event_log_2000000');
    const [{ table }] = await db.dataSource.query(`SELECT to_regclass('event_log_2000000')::text AS table`);
    expect(table).toBeNull();
  });
});

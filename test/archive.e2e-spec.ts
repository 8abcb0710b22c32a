import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { EventLogRepository } from '../src/event-log/event-log.repository.js';
import { CliResult, describeRun, runCli } from './support/cli.js';
import { openDataSource } from './support/database.js';
import { eventually } from './support/eventually.js';
import { newLogEntry } from './support/event-log.js';
import { api, deliver, RunningDaemon, startDaemon } from './support/http.js';
import { webhookEvent } from './support/webhook-events.js';

/**
 * docs/reference.md §8, The archive: `menu-sync archive --before <position>` beside a running
 * daemon exports the closed partitions, drops them, and the webhook still answers a duplicate of
 * an archived event `200 duplicate` with its original position; `archive verify` passes, then
 * names a corrupted file (exit 1); `archive restore` attaches a range again, every column of
 * every entry as it was. Partitions of 1 000 positions from position 2 000 000 on.
 */

const FIRST = 2_000_000;
const DELIVERED = 40;
const APPENDED = 2000;

describe('the event log archive (built daemon and CLI)', () => {
  let app: RunningDaemon;
  let db: pg.Client;
  let dataSource: DataSource;
  let archiveDir: string;
  let cliEnv: Record<string, string>;
  const bodies: Array<Record<string, unknown>> = [];
  const positions: number[] = [];
  const run = (args: string[]) => runCli(args, cliEnv, app.process.cwd, 120_000);
  const ok = (result: CliResult) => ({ code: result.code, run: result.code === 0 ? '' : describeRun(result) });
  const entries = (from: number, to: number) =>
    db
      .query(
        `SELECT row_to_json(e)::text AS row FROM event_log e WHERE position >= $1 AND position < $2 ORDER BY position`,
        [from, to],
      )
      .then((result) => result.rows.map((row: { row: string }) => row.row));

  const caughtUp = () =>
    eventually(async () => {
      const status = await api(app.url, '/api/v1/projections');
      expect(status.json.data.map((p: { lag: number }) => p.lag)).toEqual([0, 0]);
    }, 30_000);
  /** The read model's resources, as the API's tables hold them. */
  const readModel = async () => {
    const tables: string[][] = [];
    for (const table of ['proj_menu.products']) {
      const { rows } = await db.query(`SELECT row_to_json(t)::text AS row FROM ${table} t ORDER BY 1`);
      tables.push(rows.map((row: { row: string }) => row.row));
    }
    return tables;
  };

  beforeAll(async () => {
    archiveDir = await mkdtemp(path.join(tmpdir(), 'menu-sync-archive-e2e-'));
    app = await startDaemon({ LOG_LEVEL: 'info', EVENT_LOG_PARTITION_SIZE: '1000', ARCHIVE_DIR: archiveDir });
    cliEnv = {
      DATABASE_URL: app.database.url,
      TOKEN_ENCRYPTION_KEY: app.process.env.TOKEN_ENCRYPTION_KEY,
      ARCHIVE_DIR: archiveDir,
      LOG_LEVEL: 'warn',
    };
    db = new pg.Client({ connectionString: app.database.url });
    await db.connect();
    await db.query(`SELECT setval('event_log_position_seq', ${FIRST - 1})`);
    await db.query(`SELECT event_log_extend(2500, 1000)`);
    for (let i = 0; i < DELIVERED; i++) {
      const body = webhookEvent({ subjectId: String(100 + i) });
      const answer = await deliver(app.url, body);
      expect(answer.status).toBe(202);
      bodies.push(body);
      positions.push(answer.json.position);
    }
    dataSource = await openDataSource(app.database.url, 2);
    const log = new EventLogRepository(dataSource);
    for (let i = 0; i < APPENDED; i += 500)
      await log.append(
        Array.from({ length: 500 }, (_, k) =>
          newLogEntry({
            eventId: `bulk-${i + k}`,
            eventType: 'order.updated',
            subjectId: String((i + k) % 50),
            occurredAt: new Date(Date.UTC(2024, 0, 1, 0, 0, i + k)).toISOString(),
            seq: i + k,
          }),
        ),
      );
    await caughtUp();
  }, 180_000);

  afterAll(async () => {
    await dataSource?.destroy();
    await db?.end();
    await app?.close();
    await rm(archiveDir, { recursive: true, force: true });
  });

  it('archives, answers duplicates of archived events, verifies, names a corrupted file and restores byte for byte', async () => {
    const before = await entries(FIRST, FIRST + 2000);
    expect(positions).toEqual(Array.from({ length: DELIVERED }, (_, i) => FIRST + i));

    const { rows: archivedProducts } = await db.query(
      `SELECT subject_id AS id FROM event_log WHERE position < $1 AND subject_type = 'product' GROUP BY 1 ORDER BY 1`,
      [FIRST + 2000],
    );
    const archived = await run(['archive', '--before', String(FIRST + 2000)]);
    expect(ok(archived)).toEqual({ code: 0, run: '' });
    expect(
      archived.stdout
        .trim()
        .split('\n')
        .map((line) => line.split(':')[0]),
    ).toEqual(['event_log_0', 'event_log_1000000', 'event_log_2000000', 'event_log_2001000']);
    expect(await entries(FIRST, FIRST + 2000)).toEqual([]);
    // Folded into the archive base before the drop: each archived product's newest version, for as_of.
    const { rows: based } = await db.query(`SELECT id FROM proj_menu__archive_base.products ORDER BY 1`);
    expect({ count: based.length, ids: based }).toEqual({ count: archivedProducts.length, ids: archivedProducts });
    const { rows: audited } = await db.query(
      `SELECT target FROM audit_log WHERE action = 'event_log.archived' ORDER BY id`,
    );
    expect(audited.map((row) => row.target)).toEqual([
      'event_log_0',
      'event_log_1000000',
      'event_log_2000000',
      'event_log_2001000',
    ]);

    // The running daemon hears of the horizon (NOTIFY) and answers an archived position 410, naming it and the file.
    await eventually(async () => {
      const gone = await api(app.url, `/api/v1/events/${FIRST + 1500}`);
      expect({ status: gone.status, before: gone.json.archived_before, file: gone.json.archive_file }).toEqual({
        status: 410,
        before: FIRST + 2000,
        file: 'event_log_2001000-2002000.ndjson.br',
      });
    });

    for (let i = 0; i < DELIVERED; i++) {
      const again = await deliver(app.url, bodies[i]);
      expect({ status: again.status, body: again.json }).toEqual({
        status: 200,
        body: { status: 'duplicate', position: positions[i] },
      });
    }

    // A replay starts from the checkpoint the archive relied on; --from-archive from the whole history: the same model.
    const model = await readModel();
    expect(model.map((table) => table.length)).toEqual([DELIVERED]);
    const replayed = await run(['replay']);
    expect(ok(replayed)).toEqual({ code: 0, run: '' });
    expect(replayed.stdout).toMatch(/^menu: rebuilt from the checkpoint at position \d+ and 0 log entries in /m);
    await caughtUp();
    expect(await readModel()).toEqual(model);
    const fromArchive = await run(['replay', '--from-archive']);
    expect(ok(fromArchive)).toEqual({ code: 0, run: '' });
    expect(fromArchive.stdout).toMatch(
      new RegExp(`^orders: rebuilt from the archive and ${DELIVERED + APPENDED} log entries in `, 'm'),
    );
    await caughtUp();
    expect(await readModel()).toEqual(model);

    const compared = await run(['verify', '--from-archive']);
    expect(ok(compared)).toEqual({ code: 0, run: '' });
    expect(compared.stdout).toMatch(/^orders: identical to a rebuild from the archive and the log$/m);
    const fromCheckpoint = await run(['verify', '--projection', 'menu']);
    expect(ok(fromCheckpoint)).toEqual({ code: 0, run: '' });
    expect(fromCheckpoint.stdout).toMatch(
      /^menu: identical to a rebuild from the checkpoint at position \d+ and the log after it$/m,
    );

    const verified = await run(['archive', 'verify']);
    expect(ok(verified)).toEqual({ code: 0, run: '' });
    expect(verified.stdout).toContain('event_log_2000000-2001000.ndjson.br: ok\n');

    const restored = await run(['archive', 'restore', `${FIRST}-${FIRST + 999}`]);
    expect(ok(restored)).toEqual({ code: 0, run: '' });
    expect(restored.stdout).toBe(
      `event_log_2000000: 1000 events (positions ${FIRST}-${FIRST + 999}) restored from event_log_2000000-2001000.ndjson.br\n`,
    );
    expect(await entries(FIRST, FIRST + 1000)).toEqual(before.slice(0, 1000));
    const raw = await api(app.url, `/api/v1/events/${FIRST + 3}/raw`);
    expect(raw.status).toBe(200);
    expect(raw.json).toEqual(bodies[3]);

    const target = path.join(archiveDir, 'event_log_2001000-2002000.ndjson.br');
    const bytes = await readFile(target);
    bytes[bytes.length >> 1] ^= 0x55;
    await writeFile(target, bytes);
    const corrupted = await run(['archive', 'verify']);
    expect(corrupted.code).toBe(1);
    expect(corrupted.stderr).toContain('event_log_2001000-2002000.ndjson.br: differs from the manifest');
    expect(corrupted.stderr).not.toContain('event_log_2000000-2001000.ndjson.br');
  }, 180_000);
});

import { access, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { EventLogRepository } from '../../src/event-log/event-log.repository.js';
import { readManifest } from '../../src/archive/archive-manifest.js';
import { CliResult, describeRun, runCli, spawnCli } from '../support/cli.js';
import { openDataSource } from '../support/database.js';
import { sleep } from '../support/daemon-process.js';
import { eventually } from '../support/eventually.js';
import { newLogEntry } from '../support/event-log.js';
import { api, RunningDaemon, startDaemon } from '../support/http.js';

/**
 * Issue 43, fault test: `menu-sync archive` killed with SIGKILL while it writes a partition's file,
 * and again while its detach waits for the log's lock, leaves the partition attached with every
 * entry as it was (no file under the final name, the row at most `exported`); a rerun archives it.
 * One partition of 30 000 positions from position 2 000 000, so that its export lasts long enough
 * to be caught.
 */

const FIRST = 2_000_000;
const SIZE = 30_000;
const FILE = `event_log_${FIRST}-${FIRST + SIZE}.ndjson.br`;

describe('fault: archive killed during export and during detach (built daemon and CLI)', () => {
  let app: RunningDaemon;
  let db: pg.Client;
  let dataSource: DataSource;
  let archiveDir: string;
  let cliEnv: Record<string, string>;
  let digest: unknown;
  const archive = () => ['archive', '--before', String(FIRST + SIZE)];
  const ok = (result: CliResult) => ({ code: result.code, run: result.code === 0 ? '' : describeRun(result) });
  const partitionDigest = async () =>
    (
      await db.query(
        `SELECT count(*)::int AS n, encode(sha256(string_agg(row_to_json(e)::text, E'\\n' ORDER BY position)::bytea), 'hex') AS rows
           FROM event_log e WHERE position >= $1 AND position < $2`,
        [FIRST, FIRST + SIZE],
      )
    ).rows[0];
  const attached = async () =>
    (await db.query(`SELECT partition::text AS name FROM event_log_partitions()`)).rows.map((row) => row.name);
  const state = async () =>
    (await db.query(`SELECT state FROM event_log_archives WHERE lower_bound = $1`, [FIRST])).rows.map(
      (row) => row.state,
    );

  beforeAll(async () => {
    archiveDir = await mkdtemp(path.join(tmpdir(), 'menu-sync-archive-fault-'));
    app = await startDaemon({ LOG_LEVEL: 'warn', ARCHIVE_DIR: archiveDir });
    cliEnv = {
      DATABASE_URL: app.database.url,
      TOKEN_ENCRYPTION_KEY: app.process.env.TOKEN_ENCRYPTION_KEY,
      ARCHIVE_DIR: archiveDir,
      LOG_LEVEL: 'warn',
    };
    db = new pg.Client({ connectionString: app.database.url });
    await db.connect();
    await db.query(`SELECT setval('event_log_position_seq', ${FIRST - 1})`);
    await db.query(`SELECT event_log_extend(${SIZE + 1000}, ${SIZE})`);
    dataSource = await openDataSource(app.database.url, 2);
    const log = new EventLogRepository(dataSource);
    const description = 'Slow-roasted pulled pork shoulder in a brioche bun with house slaw. '.repeat(8);
    for (let i = 0; i < SIZE + 10; i += 1000)
      await log.append(
        Array.from({ length: Math.min(1000, SIZE + 10 - i) }, (_, k) =>
          newLogEntry({
            eventId: `fault-${i + k}`,
            eventType: 'order.updated',
            subjectId: String((i + k) % 500),
            occurredAt: new Date(Date.UTC(2024, 0, 1, 0, 0, i + k)).toISOString(),
            seq: i + k,
            included: [{ id: String((i + k) % 500), type: 'order', attributes: { description, n: i + k } }],
          }),
        ),
      );
    await eventually(async () => {
      const status = await api(app.url, '/api/v1/projections');
      expect(status.json.data.map((p: { lag: number }) => p.lag)).toEqual([0, 0]);
    }, 60_000);
    digest = await partitionDigest();
  }, 240_000);

  afterAll(async () => {
    await dataSource?.destroy();
    await db?.end();
    await app?.close();
    await rm(archiveDir, { recursive: true, force: true });
  });

  it('killed while it writes the file: the partition stays, whole, and no file under the final name', async () => {
    const command = spawnCli(archive(), cliEnv, app.process.cwd);
    const partial = path.join(archiveDir, `${FILE}.partial`);
    for (;;) {
      if (
        await access(partial).then(
          () => true,
          () => false,
        )
      )
        break;
      expect(command.running).toBe(true);
      await sleep(2);
    }
    command.kill('SIGKILL');
    expect((await command.wait()).signal).toBe('SIGKILL');

    expect(await attached()).toContain('event_log_2000000');
    expect(await partitionDigest()).toEqual(digest);
    expect(await state()).toEqual([]);
    expect(await readdir(archiveDir)).not.toContain(FILE);
  }, 120_000);

  it('killed while its detach waits for the lock: the partition stays, whole; a rerun archives it', async () => {
    const holder = new pg.Client({ connectionString: app.database.url });
    await holder.connect();
    try {
      await holder.query(`BEGIN`);
      await holder.query(`LOCK TABLE event_log IN ACCESS SHARE MODE`);
      const command = spawnCli(archive(), cliEnv, app.process.cwd);
      await eventually(async () => expect(await state()).toEqual(['exported']), 60_000);
      await sleep(300);
      command.kill('SIGKILL');
      expect((await command.wait()).signal).toBe('SIGKILL');
      await holder.query(`COMMIT`);
    } finally {
      await holder.end();
    }

    expect(await attached()).toContain('event_log_2000000');
    expect(await partitionDigest()).toEqual(digest);
    expect(await state()).toEqual(['exported']);

    const rerun = await eventually(async () => {
      const result = await runCli(archive(), cliEnv, app.process.cwd, 120_000);
      expect(ok(result)).toEqual({ code: 0, run: '' });
      return result;
    }, 30_000);
    expect(rerun.stdout).toContain(
      `event_log_2000000: ${SIZE} events (positions ${FIRST}-${FIRST + SIZE - 1}) archived to ${FILE}`,
    );
    expect(await attached()).not.toContain('event_log_2000000');
    expect(await state()).toEqual(['archived']);
    const manifest = await readManifest(archiveDir);
    expect(manifest.files.find((file) => file.file === FILE)).toMatchObject({ state: 'archived', events: SIZE });
    expect(ok(await runCli(['archive', 'verify'], cliEnv, app.process.cwd, 120_000))).toEqual({ code: 0, run: '' });
  }, 180_000);
});

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { describeRun, runCli } from './support/cli.js';
import { DaemonProcess, ROOT_DIR, daemonEnv } from './support/daemon-process.js';
import { TEST_SERVER_URL } from './support/database.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, deliver, LOOPBACK_NETWORKS, RunningDaemon, sendJson, WEBHOOK_KEY } from './support/http.js';
import { SinkReceiver } from './support/sink-receiver.js';
import { webhookEvent } from './support/webhook-events.js';

/**
 * docs/reference.md §13, Least privilege: `menu-sync migrate` runs as the database's owner
 * (DATABASE_MIGRATION_URL), the grants block of the reference is run as written, and `serve` runs
 * as a role holding only those grants: a webhook, the reads, an HTTP sink and a replay all work,
 * while the role cannot change the log nor create tables in `public`.
 */

const suffix = randomBytes(4).toString('hex');
const OWNER = `ms_owner_${suffix}`;
const APP = `ms_app_${suffix}`;
const DATABASE = `ms_least_${suffix}`;
const OWNER_PASSWORD = `owner-${randomBytes(12).toString('hex')}`;
const APP_PASSWORD = `app-${randomBytes(12).toString('hex')}`;

function urlOf(user: string, password: string): string {
  const url = new URL(TEST_SERVER_URL);
  url.username = user;
  url.password = password;
  url.pathname = `/${DATABASE}`;
  return url.toString();
}

/** The reference's grants block, for this test's roles and database. */
function documentedGrants(): string {
  const reference = readFileSync(path.join(ROOT_DIR, 'docs', 'reference.md'), 'utf8');
  const block = /<!-- least-privilege-grants -->\s*```sql\n([\s\S]*?)```/.exec(reference);
  if (block === null) throw new Error('docs/reference.md has no least-privilege-grants block');
  return block[1]
    .replace(/\bmenu_sync_app\b/g, APP)
    .replace(/\bmenu_sync_owner\b/g, OWNER)
    .replace(/ON DATABASE menu_sync\b/g, `ON DATABASE ${DATABASE}`);
}

async function sql<T extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

describe('serve as a role with only the documented grants', () => {
  const ownerUrl = urlOf(OWNER, OWNER_PASSWORD);
  const appUrl = urlOf(APP, APP_PASSWORD);
  let dir: string;
  let daemon: DaemonProcess | undefined;
  let receiver: SinkReceiver;
  let env: Record<string, string>;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-least-'));
    await sql(TEST_SERVER_URL, `CREATE ROLE ${OWNER} LOGIN PASSWORD '${OWNER_PASSWORD}'`);
    await sql(TEST_SERVER_URL, `CREATE ROLE ${APP} LOGIN PASSWORD '${APP_PASSWORD}'`);
    await sql(TEST_SERVER_URL, `GRANT ${APP} TO ${OWNER}`);
    await sql(TEST_SERVER_URL, `CREATE DATABASE ${DATABASE} OWNER ${OWNER} ENCODING 'UTF8' TEMPLATE template0`);
    receiver = await new SinkReceiver().start();
    env = daemonEnv({
      DATABASE_URL: appUrl,
      DATA_DIR: dir,
      WEBHOOK_KEYS: WEBHOOK_KEY,
      API_TOKENS: API_TOKEN,
      SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
    });
  });

  afterAll(async () => {
    if (daemon !== undefined) {
      daemon.kill('SIGTERM');
      await daemon.waitForExit(15_000).catch(() => undefined);
    }
    await receiver?.close();
    await sql(TEST_SERVER_URL, `DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
    await sql(TEST_SERVER_URL, `DROP ROLE IF EXISTS ${APP}`);
    await sql(TEST_SERVER_URL, `DROP ROLE IF EXISTS ${OWNER}`);
    await rm(dir, { recursive: true, force: true });
  });

  it('migrates as the owner (DATABASE_MIGRATION_URL), then serves, syncs and replays as the daemon role', async () => {
    const migrated = await runCli(['migrate'], { ...env, DATABASE_MIGRATION_URL: ownerUrl }, dir);
    expect({ code: migrated.code, run: describeRun(migrated) }).toMatchObject({ code: 0 });
    expect(
      await sql(ownerUrl, `SELECT tableowner FROM pg_tables WHERE tablename IN ('event_log', 'migrations')`),
    ).toEqual([{ tableowner: OWNER }, { tableowner: OWNER }]);
    await sql(ownerUrl, documentedGrants());

    daemon = await DaemonProcess.start({ cwd: dir, env });
    const app = { url: daemon.url } as RunningDaemon;
    const sessions = await sql<{ usename: string }>(
      TEST_SERVER_URL,
      `SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'menu-sync%'`,
      [DATABASE],
    );
    expect(sessions).toEqual([{ usename: APP }]);

    const created = await sendJson(app, 'POST', '/api/v1/sinks', { kind: 'http', url: receiver.url, from: 'start' });
    expect(created.status).toBe(201);
    receiver.secrets = [created.json.data.secret];

    const first = webhookEvent({ subjectId: '7701', attributes: { title: 'Granted toast' } });
    expect((await deliver(app.url, first)).status).toBe(202);
    await eventually(async () => {
      const product = await api(app.url, '/api/v1/products/7701');
      expect(product.status).toBe(200);
      expect(product.json.attributes.title).toBe('Granted toast');
    }, 20_000);
    await eventually(async () => expect(receiver.catalogue.get('product/7701')?.op).toBe('upsert'), 20_000);
    expect((await api(app.url, '/api/v1/sinks')).json.data.map((sink: { id: string }) => sink.id)).toEqual([
      created.json.data.id,
    ]);

    const replayed = await runCli(['replay', '--projection', 'all'], env, dir, 120_000);
    expect({ code: replayed.code, run: describeRun(replayed) }).toMatchObject({ code: 0 });
    expect(
      await sql(appUrl, `SELECT nspowner::regrole::text AS owner FROM pg_namespace WHERE nspname = 'proj_menu'`),
    ).toEqual([{ owner: APP }]);
    const verified = await runCli(['verify', '--projection', 'menu'], env, dir, 120_000);
    expect({ code: verified.code, run: describeRun(verified) }).toMatchObject({ code: 0 });

    const second = webhookEvent({ subjectId: '7701', attributes: { title: 'Granted toast, replayed' } });
    expect((await deliver(app.url, second)).status).toBe(202);
    await eventually(async () => {
      expect((await api(app.url, '/api/v1/products/7701')).json.attributes.title).toBe('Granted toast, replayed');
    }, 20_000);
    await eventually(
      async () =>
        expect(receiver.catalogue.get('product/7701')?.resource?.attributes?.title).toBe('Granted toast, replayed'),
      20_000,
    );

    for (const statement of ['UPDATE event_log SET payload = payload', 'CREATE TABLE public.not_allowed (id int)']) {
      await expect(sql(appUrl, statement)).rejects.toMatchObject({ code: '42501' });
    }
    expect(daemon.logs).not.toContain(APP_PASSWORD);
    expect(daemon.logs).not.toContain(OWNER_PASSWORD);
  }, 240_000);

  it('archives, verifies and restores a partition as the daemon role, which cannot drop one itself', async () => {
    const archiveEnv = { ...env, ARCHIVE_DIR: path.join(dir, 'archive') };
    // The first partition closed: the sequence past its bound, a partition after the next one.
    await sql(ownerUrl, `SELECT setval('event_log_position_seq', 1999999)`);
    await sql(ownerUrl, `SELECT event_log_extend(1000, 1000)`);
    const before = await sql(appUrl, `SELECT row_to_json(e)::text AS row FROM event_log e WHERE position < 1000000`);
    expect(before.length).toBe(2);

    const archived = await runCli(['archive', '--before', '1000000'], archiveEnv, dir, 120_000);
    expect({ code: archived.code, run: describeRun(archived) }).toMatchObject({ code: 0 });
    expect(archived.stdout).toContain(
      'event_log_0: 2 events (positions 0-999999) archived to event_log_0-1000000.ndjson.br',
    );
    expect(await sql(appUrl, `SELECT count(*)::int AS n FROM event_log WHERE position < 1000000`)).toEqual([{ n: 0 }]);
    const verified = await runCli(['archive', 'verify'], archiveEnv, dir);
    expect({ code: verified.code, stdout: verified.stdout }).toEqual({
      code: 0,
      stdout: 'event_log_0-1000000.ndjson.br: ok\n',
    });

    await expect(sql(appUrl, 'DROP TABLE event_log_1000000')).rejects.toMatchObject({ code: '42501' });
    const [{ id }] = await sql<{ id: string }>(appUrl, `SELECT id::text AS id FROM event_log_archives`);
    await expect(sql(appUrl, `SELECT event_log_archive_detach($1)`, [id])).rejects.toMatchObject({ code: '55000' });

    const restored = await runCli(['archive', 'restore', '1-2'], archiveEnv, dir, 120_000);
    expect({ code: restored.code, run: describeRun(restored) }).toMatchObject({ code: 0 });
    expect(await sql(appUrl, `SELECT row_to_json(e)::text AS row FROM event_log e WHERE position < 1000000`)).toEqual(
      before,
    );
  }, 240_000);
});

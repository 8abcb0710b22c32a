import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort, loadWithoutExitHooks } from '../../src/database/embedded-postgres.js';
import { DaemonProcess, sleep, daemonEnv } from '../support/daemon-process.js';
import { webhookEvent } from '../support/webhook-events.js';
import { closeAgent, isAcked, Load, logCounts, projections, statusCounts } from './load.js';

/** Generous bounds for a shared, loaded CI machine (initdb, daemons starting); nothing is asserted on them. */
const SETUP_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 180_000;

/**
 * Issue 11, fault test: PostgreSQL stopped and started again under load. The database is an
 * embedded PostgreSQL (the embedded-postgres package) that this test owns, so CI's shared server is
 * untouched. While it is down every delivery gets 503 with Retry-After and /health/ready 503; no
 * other 4XX/5XX at any time; after it is back and the sender has resent what was not acknowledged,
 * every event is in the log exactly once, /health/ready is 200 and the projector is at the head.
 */

const WEBHOOK_KEY = `outage-${randomBytes(16).toString('hex')}`;
const API_TOKEN = `outage-token-${randomBytes(16).toString('hex')}`;
const MAX_EVENTS = 1500;
const OUTAGE_MS = 2000;

type EmbeddedPostgres = InstanceType<Awaited<ReturnType<typeof loadWithoutExitHooks>>>;

async function readyStatus(url: string): Promise<number> {
  try {
    return (await fetch(`${url}/health/ready`, { signal: AbortSignal.timeout(10_000) })).status;
  } catch {
    return 0;
  }
}

describe('fault: PostgreSQL stopped and started under load (embedded PostgreSQL owned by the test, built daemon)', () => {
  let dir: string;
  let postgres: EmbeddedPostgres | undefined;
  let daemon: DaemonProcess | undefined;
  let client: pg.Client | undefined;
  let databaseUrl: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-outage-'));
    // PostgreSQL runs as the `postgres` user when the test runs as root: it must reach its directory.
    if (userInfo().uid === 0) await chmod(dir, 0o711);
    const password = randomBytes(12).toString('hex');
    const port = await freePort();
    const EmbeddedPostgresClass = await loadWithoutExitHooks();
    postgres = new EmbeddedPostgresClass({
      databaseDir: path.join(dir, 'postgres'),
      port,
      user: 'postgres',
      password,
      authMethod: 'scram-sha-256',
      persistent: true,
      createPostgresUser: userInfo().uid === 0,
      initdbFlags: ['--encoding=UTF8', '--locale=C'],
      // fsync off: the test stops the server cleanly, and CI's disk is shared.
      postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off'],
      onLog: () => undefined,
      onError: () => undefined,
    });
    await postgres.initialise();
    await postgres.start();
    const setup = postgres.getPgClient('postgres', '127.0.0.1');
    await setup.connect();
    await setup.query('CREATE DATABASE menu_sync');
    await setup.end();
    databaseUrl = `postgres://postgres:${password}@127.0.0.1:${port}/menu_sync`;
    daemon = await DaemonProcess.start({
      cwd: dir,
      readyTimeoutMs: 150_000,
      env: daemonEnv({
        DATABASE_URL: databaseUrl,
        DATA_DIR: dir,
        WEBHOOK_KEYS: WEBHOOK_KEY,
        API_TOKENS: API_TOKEN,
      }),
    });
  }, SETUP_TIMEOUT_MS);

  afterAll(async () => {
    closeAgent();
    await client?.end().catch(() => undefined);
    if (daemon) {
      daemon.kill('SIGTERM');
      await daemon.waitForExit(15_000).catch(async () => {
        daemon!.kill('SIGKILL');
        await daemon!.waitForExit();
      });
    }
    await postgres?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(
    'only 503 + Retry-After while it is down; afterwards every event stored exactly once and the projector caught up',
    async () => {
      const url = daemon!.url;
      let seq = 0;
      const load = new Load({
        targets: () => [url],
        key: WEBHOOK_KEY,
        senders: 4,
        events: MAX_EVENTS,
        pauseMs: 15,
        make: () =>
          webhookEvent({
            eventId: `outage-${++seq}-${randomBytes(4).toString('hex')}`,
            subjectId: String(1 + (seq % 50)),
          }),
      });
      for (const deadline = Date.now() + 30_000; load.ackedCount < 100 && Date.now() < deadline;) await sleep(10);
      expect(load.ackedCount).toBeGreaterThanOrEqual(100);

      await postgres!.stop();
      const stoppedAt = Date.now();
      const readyDuring: number[] = [];
      // At least OUTAGE_MS, and long enough for a few probes and deliveries on a slow machine (bounded).
      while (
        (Date.now() - stoppedAt < OUTAGE_MS || readyDuring.length < 4 || load.answersBetween(stoppedAt).length < 25) &&
        Date.now() - stoppedAt < 60_000
      ) {
        readyDuring.push(await readyStatus(url));
        await sleep(200);
      }
      const restartingAt = Date.now();
      await postgres!.start();
      const ackedAtRestart = load.ackedCount;
      for (const deadline = Date.now() + 30_000; load.ackedCount < ackedAtRestart + 100 && Date.now() < deadline;)
        await sleep(10);
      load.stop();
      await load.done;

      // While it was down: 503 with Retry-After, nothing else; /health/ready 503.
      const down = load.attempts.filter((attempt) => attempt.sentAt >= stoppedAt && attempt.answeredAt < restartingAt);
      expect(down.length).toBeGreaterThan(20);
      expect(statusCounts(down)).toEqual({ 503: down.length });
      expect(readyDuring.length).toBeGreaterThan(3);
      expect(readyDuring.filter((status) => status !== 503)).toEqual([]);
      // At any time: 202 (or 200 duplicate) or 503 with Retry-After; never another 4XX/5XX, never a dropped connection.
      expect(load.attempts.filter((attempt) => !isAcked(attempt.status) && attempt.status !== 503)).toEqual([]);
      expect(load.attempts.filter((attempt) => attempt.status === 503 && attempt.retryAfter === undefined)).toEqual([]);
      expect(load.ackedCount).toBeGreaterThan(ackedAtRestart);

      // The sender resends what was not acknowledged; then every event is in the log exactly once.
      await load.resend(url);
      expect(load.attempts.filter((attempt) => !isAcked(attempt.status) && attempt.status !== 503)).toEqual([]);
      client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      const ids = load.deliveries.map((delivery) => delivery.eventId);
      const counts = await logCounts(client, ids);
      expect(ids.filter((id) => counts.get(id) !== 1)).toEqual([]);
      expect(Number((await client.query('SELECT count(*) FROM event_log')).rows[0].count)).toBe(ids.length);

      expect(await readyStatus(url)).toBe(200);
      let status = await projections(url, API_TOKEN);
      for (
        const deadline = Date.now() + 30_000;
        status.some((p) => p.lag !== 0 || p.state !== 'running') && Date.now() < deadline;
        await sleep(100)
      ) {
        status = await projections(url, API_TOKEN);
      }
      expect(status.map((p) => ({ lag: p.lag, atHead: p.position === p.head, state: p.state }))).toEqual(
        status.map(() => ({ lag: 0, atHead: true, state: 'running' })),
      );
      expect(daemon!.hasExited).toBe(false);
      if (process.env.TEST_VERBOSE)
        process.stderr.write(
          `[outage] ${ids.length} events, attempts ${JSON.stringify(statusCounts(load.attempts))}\n`,
        );
    },
    TEST_TIMEOUT_MS,
  );
});

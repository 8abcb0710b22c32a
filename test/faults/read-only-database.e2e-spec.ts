import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { TEST_SERVER_URL } from '../support/database.js';
import { RunningDaemon, startDaemon, WEBHOOK_KEY, API_TOKEN } from '../support/http.js';
import { sleep } from '../support/daemon-process.js';
import { webhookEvent } from '../support/webhook-events.js';
import { closeAgent, isAcked, Load, logCounts, projections, statusCounts } from './load.js';

/** Generous bounds for a shared, loaded CI machine (initdb, daemons starting); nothing is asserted on them. */
const SETUP_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 180_000;

/**
 * Issue 11, fault test: the database turns read-only under load (`ALTER DATABASE … SET
 * default_transaction_read_only = on`, the daemon's sessions terminated so that they reconnect
 * read-only — what a failover to a standby or a full disk looks like from the daemon). Every
 * delivery then gets 503 with Retry-After, never a 2XX, nothing is stored, and the daemon keeps
 * running; once the database is writable again (and the daemon's sessions reconnected), deliveries
 * succeed again (the resend of what got 503 included) and the projector catches up.
 */

const EVENTS_BEFORE = 60;
const EVENTS_DURING = 120;
const EVENTS_AFTER = 60;

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_SERVER_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Ends every session of the daemon on `database` (it reconnects, with the database's current defaults). */
const terminateDaemonSessions = (database: string) =>
  admin(
    `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${database}' AND application_name = 'menu-sync'`,
  );

describe('fault: a read-only database (built daemon, child process)', () => {
  let daemon: RunningDaemon;
  let client: pg.Client;

  beforeAll(async () => {
    daemon = await startDaemon({ LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn' });
    client = new pg.Client({ connectionString: daemon.database.url });
    await client.connect();
  }, SETUP_TIMEOUT_MS);

  afterAll(async () => {
    closeAgent();
    await client?.end();
    if (daemon)
      await admin(`ALTER DATABASE ${daemon.database.name} RESET default_transaction_read_only`).catch(() => undefined);
    await daemon?.close();
  });

  const make = (prefix: string) => (n: number) =>
    webhookEvent({ eventId: `${prefix}-${n}-${randomBytes(4).toString('hex')}`, subjectId: String(1 + (n % 40)) });

  it(
    'answers 503 + Retry-After (never 2XX, never a crash) while read-only, and accepts again once writable',
    async () => {
      const before = new Load({
        targets: () => [daemon.url],
        key: WEBHOOK_KEY,
        senders: 4,
        events: EVENTS_BEFORE,
        pauseMs: 5,
        make: make('before'),
      });
      await before.done;
      expect(statusCounts(before.attempts)).toEqual({ 202: EVENTS_BEFORE });

      await admin(`ALTER DATABASE ${daemon.database.name} SET default_transaction_read_only = on`);
      await terminateDaemonSessions(daemon.database.name);
      const during = new Load({
        targets: () => [daemon.url],
        key: WEBHOOK_KEY,
        senders: 6,
        events: EVENTS_DURING,
        pauseMs: 5,
        make: make('during'),
      });
      await during.done;
      // Only 503, each with Retry-After; the process is alive and says so.
      expect(statusCounts(during.attempts)).toEqual({ 503: EVENTS_DURING });
      expect(during.attempts.filter((attempt) => !attempt.retryAfter)).toEqual([]);
      expect(daemon.process.hasExited).toBe(false);
      expect((await fetch(`${daemon.url}/health/live`)).status).toBe(200);
      // Nothing of it was stored.
      expect(
        (
          await logCounts(
            client,
            during.deliveries.map((d) => d.eventId),
          )
        ).size,
      ).toBe(0);

      await admin(`ALTER DATABASE ${daemon.database.name} RESET default_transaction_read_only`);
      // Sessions opened while read-only keep that default: reconnect them, as an operator lifting it would.
      await terminateDaemonSessions(daemon.database.name);
      await during.resend(daemon.url);
      const after = new Load({
        targets: () => [daemon.url],
        key: WEBHOOK_KEY,
        senders: 4,
        events: EVENTS_AFTER,
        pauseMs: 5,
        make: make('after'),
      });
      await after.done;
      expect(statusCounts(after.attempts)).toEqual({ 202: EVENTS_AFTER });
      const resent = during.attempts.slice(EVENTS_DURING);
      expect(resent.filter((attempt) => !isAcked(attempt.status) && attempt.status !== 503)).toEqual([]);

      const all = [...before.deliveries, ...during.deliveries, ...after.deliveries].map((d) => d.eventId);
      const counts = await logCounts(client, all);
      expect(all.filter((id) => counts.get(id) !== 1)).toEqual([]);
      expect(daemon.process.hasExited).toBe(false);

      // The projector, which failed while read-only, catches up.
      let status = await projections(daemon.url, API_TOKEN);
      for (
        const deadline = Date.now() + 30_000;
        status.some((p) => p.lag !== 0 || p.state !== 'running') && Date.now() < deadline;
        await sleep(100)
      ) {
        status = await projections(daemon.url, API_TOKEN);
      }
      expect(status.map((p) => ({ lag: p.lag, state: p.state, atHead: p.position === p.head }))).toEqual(
        status.map(() => ({ lag: 0, state: 'running', atHead: true })),
      );
      expect(Number((await client.query('SELECT count(*) FROM event_log')).rows[0].count)).toBe(all.length);
    },
    TEST_TIMEOUT_MS,
  );
});

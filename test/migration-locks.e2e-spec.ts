import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { DataSource, MigrationInterface, QueryRunner } from 'typeorm';
import { MIGRATIONS } from '../migrations/index.js';
import { dataSourceOptions } from '../src/database/data-source.factory.js';
import { runMigrations } from '../src/database/migration.runner.js';
import { DaemonProcess, daemonEnv } from './support/daemon-process.js';
import { TEST_SERVER_URL } from './support/database.js';
import { eventually } from './support/eventually.js';
import { deliver, WEBHOOK_KEY } from './support/http.js';
import { webhookEvent } from './support/webhook-events.js';

/**
 * docs/reference.md §13, Migrations that never stop ingress: every migration newer than
 * DEPLOYED_MIGRATION (the newest that every deployment has applied: the older ones never run
 * again) is applied by the real runner to a database holding a 1,000,000-event log while a load
 * posts webhooks to a daemon (ingress only) on it. No delivery may answer 503, and no session of
 * the daemon may wait 1 s or more for a lock (pg_locks sampled every 50 ms: `waitstart` of every
 * lock not granted). A statement that does block ingress (a table lock held 1.5 s) is run through
 * the same measurement first, to show that it would be caught. Any migration added later is
 * checked by the same run.
 */

/**
 * MIGRATION_LOCKS_DEPLOYED=<timestamp> checks from an older one (1765800000000: the owner scope's
 * CONCURRENTLY build on the 1M-event log). 1763800000000 and 1764100000000 built event_log indexes without CONCURRENTLY; no deployment runs them again. */
const DEPLOYED_MIGRATION = Number(process.env.MIGRATION_LOCKS_DEPLOYED ?? 1766400000000);
const EVENTS = 1_000_000;
const WORKERS = 4;
const PAUSE_MS = 10;
const MAX_LOCK_WAIT_MS = 1000;
const CHECK_NAME = 'menu-sync migration-locks check';

/** A migration that needs ACCESS EXCLUSIVE on event_log for an instant (no rewrite): what waits behind a long read. */
class LockCheck1799999999999 implements MigrationInterface {
  name = 'LockCheck1799999999999';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE event_log ADD COLUMN lock_check text');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE event_log DROP COLUMN lock_check');
  }
}

const timestampOf = (migration: { name: string }) => Number(/(\d{13})$/.exec(migration.name)![1]);
const pending = MIGRATIONS.filter((migration) => timestampOf(migration) > DEPLOYED_MIGRATION);

function migrationSource(url: string, migrations: Array<new () => MigrationInterface>): DataSource {
  const options = dataSourceOptions({ url, poolSize: 2 });
  return new DataSource({
    ...options,
    migrations,
    extra: { ...(options.extra as object), application_name: CHECK_NAME },
  } as typeof options);
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_SERVER_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

interface Measured {
  statuses: Map<number, number>;
  deliveries: number;
  p50: number;
  p99: number;
  maxLatency: number;
  maxLockWaitMs: number;
  waitedFor: string[];
  durationMs: number;
}

describe('migrations under ingress load, on a 1M-event log', () => {
  const name = `menu_sync_locks_${randomBytes(4).toString('hex')}`;
  const url = Object.assign(new URL(TEST_SERVER_URL), { pathname: `/${name}` }).toString();
  let dir: string;
  let daemon: DaemonProcess;
  let watcher: pg.Client;

  /** Runs `work` while WORKERS post webhooks and pg_locks is sampled; what the load met. */
  async function measure(work: () => Promise<void>): Promise<Measured> {
    const latencies: number[] = [];
    const statuses = new Map<number, number>();
    const waitedFor = new Set<string>();
    let maxLockWaitMs = 0;
    let running = true;
    const load = Array.from({ length: WORKERS }, async () => {
      while (running) {
        const started = performance.now();
        const answer = await deliver(daemon.url, webhookEvent({ eventId: randomUUID() }));
        latencies.push(performance.now() - started);
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
      }
    });
    const sampler = (async () => {
      while (running) {
        const { rows } = await watcher.query<{ wait_ms: number | null; waiting: string[] | null }>(
          `SELECT max(extract(epoch FROM clock_timestamp() - l.waitstart) * 1000)::float8 AS wait_ms,
                  array_agg(DISTINCT l.locktype || ' ' || coalesce(l.relation::regclass::text, '') || ' ' || l.mode) AS waiting
             FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE NOT l.granted AND a.datname = current_database() AND a.application_name LIKE 'menu-sync%'
              AND a.application_name <> $1`,
          [CHECK_NAME],
        );
        maxLockWaitMs = Math.max(maxLockWaitMs, rows[0].wait_ms ?? 0);
        for (const lock of rows[0].waiting ?? []) waitedFor.add(lock);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    const started = performance.now();
    try {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      await work();
      await new Promise((resolve) => setTimeout(resolve, 1000));
    } finally {
      running = false;
      await Promise.all([...load, sampler]);
    }
    const sorted = [...latencies].sort((a, b) => a - b);
    return {
      statuses,
      deliveries: latencies.length,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      maxLatency: sorted.at(-1) ?? 0,
      maxLockWaitMs,
      waitedFor: [...waitedFor].sort(),
      durationMs: performance.now() - started,
    };
  }

  const report = (label: string, m: Measured) =>
    process.stderr.write(
      `[migration-locks] ${label}: ${m.deliveries} deliveries in ${(m.durationMs / 1000).toFixed(1)} s, ` +
        `statuses ${JSON.stringify(Object.fromEntries(m.statuses))}, latency p50 ${m.p50.toFixed(1)} ms, ` +
        `p99 ${m.p99.toFixed(1)} ms, max ${m.maxLatency.toFixed(1)} ms; longest lock wait ${m.maxLockWaitMs.toFixed(0)} ms` +
        `${m.waitedFor.length === 0 ? '' : ` (${m.waitedFor.join('; ')})`}\n`,
    );

  beforeAll(async () => {
    await admin(`CREATE DATABASE ${name} ENCODING 'UTF8' TEMPLATE template0`);
    const deployed = migrationSource(
      url,
      MIGRATIONS.filter((migration) => timestampOf(migration) <= DEPLOYED_MIGRATION),
    );
    await deployed.initialize();
    try {
      await runMigrations(deployed);
      await deployed.query(`
        INSERT INTO event_log (event_id, event_type, subject_type, subject_id, owner_id, occurred_at, event_seq,
                               source, handled, received_at, content_type, payload, sha256)
        SELECT 'history-' || i, 'product.updated', 'product', (1000 + i % 5000)::text, (1 + i % 50)::text,
               timestamptz '2026-01-01' + i * interval '1 second', i, 'import', true,
               timestamptz '2026-01-01' + i * interval '1 second', 'application/json',
               json_build_object('data', json_build_object('id', 'history-' || i)), sha256(int8send(i))
          FROM generate_series(1, ${EVENTS}) AS i`);
      await deployed.query('VACUUM (ANALYZE) event_log');
    } finally {
      await deployed.destroy();
    }
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-locks-'));
    daemon = await DaemonProcess.spawn({
      cwd: dir,
      env: daemonEnv({
        DATABASE_URL: url,
        DATA_DIR: dir,
        WEBHOOK_KEYS: WEBHOOK_KEY,
        ROLES: 'ingress',
        MIGRATIONS_RUN: 'false',
      }),
    });
    await eventually(async () => expect((await deliver(daemon.url, webhookEvent())).status).toBe(202), 60_000);
    watcher = new pg.Client({ connectionString: url, application_name: CHECK_NAME });
    await watcher.connect();
  }, 240_000);

  afterAll(async () => {
    await watcher?.end();
    if (daemon !== undefined) {
      daemon.kill('SIGTERM');
      await daemon.waitForExit(15_000).catch(() => undefined);
    }
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('catches a statement that holds ingress back (a lock on event_log held 1.5 s)', async () => {
    const blocker = new pg.Client({ connectionString: url, application_name: CHECK_NAME });
    await blocker.connect();
    try {
      const measured = await measure(async () => {
        await blocker.query('BEGIN');
        await blocker.query('LOCK TABLE event_log IN SHARE MODE');
        await blocker.query('SELECT pg_sleep(1.5)');
        await blocker.query('COMMIT');
      });
      report('a lock on event_log held 1.5 s', measured);
      expect(measured.maxLockWaitMs).toBeGreaterThanOrEqual(MAX_LOCK_WAIT_MS);
      expect(measured.waitedFor).toContain('relation event_log RowExclusiveLock');
      expect(measured.maxLatency).toBeGreaterThanOrEqual(MAX_LOCK_WAIT_MS);
    } finally {
      await blocker.end();
    }
  }, 60_000);

  it('applies every migration newer than the deployed ones without a 503 or an INSERT waiting 1 s', async () => {
    const all = migrationSource(url, MIGRATIONS);
    await all.initialize();
    let applied: string[] = [];
    try {
      const measured = await measure(async () => {
        applied = await runMigrations(all);
      });
      report(`${applied.length} migration(s) applied: ${applied.join(', ') || 'none'}`, measured);
      expect(applied).toEqual(pending.map((migration) => migration.name));
      expect([...measured.statuses.keys()]).toEqual([202]);
      expect(measured.deliveries).toBeGreaterThan(20);
      expect(measured.maxLockWaitMs).toBeLessThan(MAX_LOCK_WAIT_MS);
    } finally {
      await all.destroy();
    }
    const [{ count }] = await new DataSource(dataSourceOptions({ url, poolSize: 1 }))
      .initialize()
      .then(async (source) => {
        try {
          return await source.query(`SELECT count(*)::int AS count FROM event_log WHERE source = 'import'`);
        } finally {
          await source.destroy();
        }
      });
    expect(count).toBe(EVENTS);
  }, 120_000);

  it('a migration waiting for its lock behind a long read gives up within 0.5 s and is tried again, ingress never held', async () => {
    const reader = new pg.Client({ connectionString: url, application_name: CHECK_NAME });
    await reader.connect();
    const source = migrationSource(url, [...MIGRATIONS, LockCheck1799999999999]);
    await source.initialize();
    let applied: string[] = [];
    let tookMs = 0;
    try {
      const measured = await measure(async () => {
        await reader.query('BEGIN');
        await reader.query('SELECT count(*) FROM event_log WHERE position = 1');
        const read = reader.query('SELECT pg_sleep(3)').then(() => reader.query('COMMIT'));
        const started = performance.now();
        applied = await runMigrations(source);
        tookMs = performance.now() - started;
        await read;
      });
      report('ALTER TABLE event_log behind a 3 s read', measured);
      expect(applied).toEqual(['LockCheck1799999999999']);
      expect(tookMs).toBeGreaterThanOrEqual(2000);
      expect([...measured.statuses.keys()]).toEqual([202]);
      expect(measured.maxLockWaitMs).toBeLessThan(MAX_LOCK_WAIT_MS);
    } finally {
      await source.destroy();
      await reader.end();
    }
  }, 60_000);
});

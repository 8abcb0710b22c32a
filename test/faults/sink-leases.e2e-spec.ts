import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DaemonProcess, sleep } from '../support/daemon-process.js';
import { createTestDatabase, TestDatabase } from '../support/database.js';
import { api, LOOPBACK_NETWORKS, metricValue } from '../support/http.js';
import { menuEvent, product } from '../support/menu-events.js';
import { SinkReceiver } from '../support/sink-receiver.js';
import { sinkLeaseKey } from '../../src/sinks/dispatch/sink-shares.js';
import { closeAgent, isAcked, Load, statusCounts } from './load.js';

/** Generous bounds for a shared, loaded machine (daemons starting, catching up); nothing is asserted on them. */
const SETUP_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 420_000;

/**
 * Issue 33, fault test: three `serve` processes on one database share 20 HTTP sinks (a lease per
 * bucket of sinks, docs/design.md) under webhook load sent to all three. The process holding the most sinks
 * is killed with SIGKILL: its sinks are delivered by the others within 5 s of the kill; restarted,
 * it takes a share back. No receiver ever has two requests at once, and every change of the feed
 * reaches every receiver.
 */

const WEBHOOK_KEY = `leases-${randomBytes(16).toString('hex')}`;
const API_TOKEN = `leases-token-${randomBytes(16).toString('hex')}`;
const SINKS = 20;
const EVENTS = 900;
const OWNER = 'leases';

/** Each event creates a product of its own: one change each, so every receiver must hold every change of the feed. */
const makeEvent = (n: number) =>
  menuEvent('created', product(String(50_000 + n), { title: `Product ${n}` }), {
    at: new Date(Date.parse('2024-06-01T10:00:00.000Z') + n * 1000).toISOString(),
    ownerId: OWNER,
    eventId: `leases-${String(n).padStart(5, '0')}`,
  });

/** Which sinks each daemon delivers, by its menu_sync_sink_leased gauge. */
async function leasedBy(daemons: DaemonProcess[], sinkIds: string[]): Promise<string[][]> {
  return Promise.all(
    daemons.map(async (daemon) => {
      const exposition = await (await fetch(`${daemon.url}/metrics`)).text();
      return sinkIds.filter((id) => metricValue(exposition, 'menu_sync_sink_leased', { sink: id }) === 1);
    }),
  );
}

/**
 * When a sink's first batch sent at or after `since` was acknowledged, by its delivery attempts
 * (`at` is when the send began, by the daemon's clock, this machine's): undefined while there is none.
 * Only a live daemon starts a send after `since`, the kill.
 */
async function firstDeliveredAfter(url: string, sinkId: string, since: number): Promise<number | undefined> {
  const page = await api(url, `/api/v1/sinks/${sinkId}/attempts?limit=1000`, API_TOKEN);
  if (page.status !== 200) throw new Error(`GET /api/v1/sinks/${sinkId}/attempts answered ${page.status}`);
  const delivered = (page.json.data as Array<{ at: string; outcome: string; duration_ms: number }>)
    .filter((attempt) => attempt.outcome === 'ok' && Date.parse(attempt.at) >= since)
    .map((attempt) => Date.parse(attempt.at) + attempt.duration_ms);
  return delivered.length === 0 ? undefined : Math.min(...delivered);
}

/** The buckets (the leases) of the sinks a daemon delivers. */
const bucketsOf = (share: string[]) => new Set(share.map(sinkLeaseKey));

/**
 * Polls until the buckets of the sinks are shared evenly among `daemons` (none holds more than
 * ceil(buckets / daemons)) with every sink delivered by exactly one daemon; answers the shares.
 */
async function sharedEvenly(daemons: DaemonProcess[], sinkIds: string[]): Promise<string[][]> {
  const cap = Math.ceil(bucketsOf(sinkIds).size / daemons.length);
  let shares: string[][] = [];
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(100)) {
    shares = await leasedBy(daemons, sinkIds);
    const even = shares.every((share) => share.length > 0 && bucketsOf(share).size <= cap);
    if (even && shares.flat().length === sinkIds.length && new Set(shares.flat()).size === sinkIds.length)
      return shares;
  }
  return shares;
}

/** What sharedEvenly waits for, as assertable values: the bucket counts at most the cap, every sink once. */
function expectEven(shares: string[][], sinkIds: string[]): void {
  const cap = Math.ceil(bucketsOf(sinkIds).size / shares.length);
  expect(shares.map((share) => bucketsOf(share).size <= cap)).toEqual(shares.map(() => true));
  expect(shares.flat().sort()).toEqual([...sinkIds].sort());
}

/** Every change of the feed, from the start, as one daemon's API answers it. */
async function feed(url: string): Promise<string[]> {
  const ids: string[] = [];
  for (let after: string | null = null; ;) {
    const query: string = after === null ? '' : `&after=${after}`;
    const page = await api(url, `/api/v1/changes?limit=1000${query}`, API_TOKEN);
    if (page.status !== 200) throw new Error(`GET /api/v1/changes answered ${page.status}: ${page.text}`);
    if (page.json.data.length === 0) return ids;
    ids.push(...page.json.data.map((change: { change_id: string }) => change.change_id));
    after = page.json.next_cursor;
  }
}

describe('fault: kill -9 the daemon holding the most sinks of three sharing 20 (built daemons, child processes)', () => {
  let database: TestDatabase;
  let dir: string;
  const receivers: SinkReceiver[] = [];
  const encryptionKey = randomBytes(32).toString('base64');

  const start = () =>
    DaemonProcess.start({
      cwd: dir,
      readyTimeoutMs: 150_000,
      env: {
        DATABASE_URL: database.url,
        DATA_DIR: dir,
        TOKEN_ENCRYPTION_KEY: encryptionKey,
        WEBHOOK_KEYS: WEBHOOK_KEY,
        API_TOKENS: API_TOKEN,
        HOST: '127.0.0.1',
        LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'info',
        RECONCILE_CRON: 'off',
        SANDBOX: 'false',
        SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
      },
    });

  beforeAll(async () => {
    database = await createTestDatabase();
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-leases-'));
    for (let i = 0; i < SINKS; i++) {
      const receiver = await new SinkReceiver().start();
      // A short pause per batch keeps each sink's requests long enough that a second one would overlap.
      receiver.always = { status: 204, delayMs: 20 };
      receivers.push(receiver);
    }
  }, SETUP_TIMEOUT_MS);

  afterAll(async () => {
    await DaemonProcess.killAll();
    closeAgent();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(
    "the dead daemon's sinks resume elsewhere within 5 s, nothing is missing, one request at a time per sink, and the restarted daemon takes a share back",
    async () => {
      const daemons = await Promise.all([start(), start(), start()]);
      const sinkIds: string[] = [];
      for (const receiver of receivers) {
        const created = await api(daemons[0].url, '/api/v1/sinks', API_TOKEN, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ kind: 'http', url: receiver.url, from: 'start', owner_ids: [OWNER], batch_size: 20 }),
        });
        expect(created.status).toBe(201);
        receiver.secrets = [created.json.data.secret];
        sinkIds.push(created.json.data.id);
      }
      // ceil(buckets / 3) at most each: 7 when the 20 sinks fall in 20 buckets.
      expectEven(await sharedEvenly(daemons, sinkIds), sinkIds);

      let alive = [...daemons];
      const load = new Load({
        targets: () => alive.map((daemon) => daemon.url),
        key: WEBHOOK_KEY,
        senders: 6,
        events: EVENTS,
        pauseMs: 5,
        make: makeEvent,
      });
      for (const deadline = Date.now() + 60_000; load.ackedCount < EVENTS / 4 && Date.now() < deadline;)
        await sleep(10);
      expect(load.ackedCount).toBeGreaterThanOrEqual(EVENTS / 4);

      const shares = await leasedBy(daemons, sinkIds);
      const most = shares.reduce((best, share, i) => (share.length > shares[best].length ? i : best), 0);
      const victim = daemons[most];
      const orphaned = shares[most];
      const survivors = daemons.filter((daemon) => daemon !== victim);

      const killedAt = Date.now();
      victim.kill('SIGKILL');
      alive = survivors;
      expect(await victim.waitForExit(5000)).toEqual({ code: null, signal: 'SIGKILL' });
      // The first delivery to each orphaned sink after the kill, necessarily by a survivor (a generous polling deadline).
      const resumedMs = new Map<string, number>();
      for (const deadline = killedAt + 60_000; resumedMs.size < orphaned.length && Date.now() < deadline;) {
        for (const id of orphaned.filter((sink) => !resumedMs.has(sink))) {
          const delivered = await firstDeliveredAfter(survivors[0].url, id, killedAt);
          if (delivered !== undefined) resumedMs.set(id, delivered - killedAt);
        }
        await sleep(200);
      }
      expect([...resumedMs.keys()].sort()).toEqual([...orphaned].sort());
      expect(Math.max(...resumedMs.values())).toBeLessThan(5000);
      expectEven(await sharedEvenly(survivors, sinkIds), sinkIds);

      const restarted = await start();
      alive = [...survivors, restarted];
      const after = await sharedEvenly(alive, sinkIds);
      expectEven(after, sinkIds);
      expect(after[2].length).toBeGreaterThanOrEqual(5);

      await load.done;
      // The platform resends whatever got no 2XX (the deliveries cut off by the kill).
      await load.resend(survivors[0].url);
      const unexpected = load.attempts.filter(
        (attempt) => !isAcked(attempt.status) && !(attempt.status === 0 && attempt.target === victim.url),
      );
      expect(statusCounts(unexpected)).toEqual({});

      // Every change of the feed at every receiver (and nothing else), one request at a time per sink.
      const changes = await waitForFeed(survivors[0].url, EVENTS);
      for (const [i, receiver] of receivers.entries()) {
        for (const deadline = Date.now() + 120_000; Date.now() < deadline; await sleep(200)) {
          if (new Set(receiver.acknowledgedChanges.map((change) => change.change_id)).size >= changes.length) break;
        }
        const got = new Set(receiver.acknowledgedChanges.map((change) => change.change_id as string));
        expect({ sink: i, missing: changes.filter((id) => !got.has(id)).length, got: got.size }).toEqual({
          sink: i,
          missing: 0,
          got: changes.length,
        });
      }
      expect(receivers.map((receiver) => receiver.maxInFlight)).toEqual(receivers.map(() => 1));
      if (process.env.TEST_VERBOSE) {
        process.stderr.write(
          `[leases] resumed after ${JSON.stringify([...resumedMs.values()].sort((a, b) => a - b))} ms\n`,
        );
      }
    },
    TEST_TIMEOUT_MS,
  );
});

/** The feed once the projector has published a change for every event (one change per event here). */
async function waitForFeed(url: string, count: number): Promise<string[]> {
  let changes: string[] = [];
  for (const deadline = Date.now() + 120_000; Date.now() < deadline; await sleep(200)) {
    changes = await feed(url);
    if (changes.length >= count) break;
  }
  expect(changes.length).toBe(count);
  return changes;
}

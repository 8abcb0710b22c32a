import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { DaemonProcess, sleep, daemonEnv } from '../support/daemon-process.js';
import { createTestDatabase, TestDatabase } from '../support/database.js';
import { destroyedEvent, Json, menuEvent, product, trait } from '../support/menu-events.js';
import { apiVersusFold, closeAgent, isAcked, Load, logCounts, projections, statusCounts } from './load.js';

/** Generous bounds for a shared, loaded CI machine (initdb, daemons starting); nothing is asserted on them. */
const SETUP_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 180_000;

/**
 * Issue 11, fault test: two `serve` processes on one database under load; the active projector is
 * killed with SIGKILL. The standby takes the projector lock within 5 s, nothing acknowledged is
 * lost, nothing is applied twice (each projection's checkpoint has applied exactly the log's
 * entries), and the query API equals the fold of the log (src/projection/evolve.ts).
 */

const WEBHOOK_KEY = `takeover-${randomBytes(16).toString('hex')}`;
const API_TOKEN = `takeover-token-${randomBytes(16).toString('hex')}`;
const PRODUCTS = 30;
const TRAITS = 5;
const EVENTS = 400;
const OWNER = '4001';
const BASE = Date.parse('2024-05-01T10:00:00.000Z');

/** Events over a few resources, with versions out of arrival order (created_at drawn from a window), some destroyed. */
function makeEvent(n: number) {
  const at = new Date(BASE + ((n * 7919) % 600) * 1000 + n).toISOString();
  const meta = { at, ownerId: OWNER, eventId: `takeover-${String(n).padStart(5, '0')}`, seq: 1000 + n };
  if (n % 10 === 3)
    return menuEvent('updated', trait(String(1 + (Math.floor(n / 10) % TRAITS)), { title: `Trait r${n}` }), meta);
  const id = String(1 + ((n * 13) % PRODUCTS));
  if (n % 17 === 5) return destroyedEvent('product', id, meta);
  return menuEvent(
    n < PRODUCTS ? 'created' : 'updated',
    product(id, { title: `Product ${id} r${n}`, cents: 100 + n, traitIds: [String(1 + (n % TRAITS))] }),
    meta,
  );
}

describe('fault: kill -9 the active projector of two daemons on one database (built daemons, child processes)', () => {
  let database: TestDatabase;
  let dir: string;
  let client: pg.Client;
  const daemons: DaemonProcess[] = [];

  const start = () =>
    DaemonProcess.start({
      cwd: dir,
      readyTimeoutMs: 150_000,
      env: daemonEnv({
        DATABASE_URL: database.url,
        DATA_DIR: dir,
        WEBHOOK_KEYS: WEBHOOK_KEY,
        API_TOKENS: API_TOKEN,
      }),
    });

  beforeAll(async () => {
    database = await createTestDatabase();
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-takeover-'));
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
  }, SETUP_TIMEOUT_MS);

  afterAll(async () => {
    await DaemonProcess.killAll();
    closeAgent();
    await client?.end();
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(
    'the standby takes over within 5 s; nothing lost or applied twice; the API equals the fold',
    async () => {
      daemons.push(await start());
      daemons.push(await start());
      // Exactly one of them is the active projector.
      let states: string[] = [];
      for (const deadline = Date.now() + 20_000; Date.now() < deadline; await sleep(100)) {
        states = await Promise.all(daemons.map(async (daemon) => (await projections(daemon.url, API_TOKEN))[0].state));
        if (states.includes('running') && states.includes('standby')) break;
      }
      expect(states.sort()).toEqual(['running', 'standby']);
      const activeIndex = (await projections(daemons[0].url, API_TOKEN))[0].state === 'running' ? 0 : 1;
      const [active, standby] = [daemons[activeIndex], daemons[1 - activeIndex]];

      let killed = false;
      const load = new Load({
        targets: () => (killed ? [standby.url] : [active.url, standby.url]),
        key: WEBHOOK_KEY,
        senders: 8,
        events: EVENTS,
        pauseMs: 5,
        make: makeEvent,
      });
      for (const deadline = Date.now() + 30_000; load.ackedCount < EVENTS / 3 && Date.now() < deadline;)
        await sleep(10);
      expect(load.ackedCount).toBeGreaterThanOrEqual(EVENTS / 3);

      const killedAt = Date.now();
      active.kill('SIGKILL');
      killed = true;
      expect(await active.waitForExit(5000)).toEqual({ code: null, signal: 'SIGKILL' });
      // A generous polling deadline; the measured takeover is what is asserted.
      let takeoverMs: number | null = null;
      for (const deadline = killedAt + 30_000; takeoverMs === null && Date.now() < deadline; await sleep(25)) {
        const [menu] = await projections(standby.url, API_TOKEN);
        if (menu.state === 'running') takeoverMs = Date.now() - killedAt;
      }
      expect(takeoverMs).not.toBeNull();
      expect(takeoverMs!).toBeLessThan(5000);

      await load.done;
      // The platform resends whatever got no 2XX (here: the deliveries cut off by the kill).
      await load.resend(standby.url);
      const unexpected = load.attempts.filter(
        (attempt) => !isAcked(attempt.status) && !(attempt.status === 0 && attempt.target === active.url),
      );
      expect(statusCounts(unexpected)).toEqual({});

      // Every delivery is in the log exactly once, and nothing else is.
      const ids = load.deliveries.map((delivery) => delivery.eventId);
      expect(ids.length).toBe(EVENTS);
      const counts = await logCounts(client, ids);
      expect(ids.filter((id) => counts.get(id) !== 1)).toEqual([]);
      expect(Number((await client.query('SELECT count(*) FROM event_log')).rows[0].count)).toBe(EVENTS);

      // The survivor catches up: both projections at the head; each checkpoint applied every entry once.
      let status = await projections(standby.url, API_TOKEN);
      for (
        const deadline = Date.now() + 30_000;
        status.some((p) => p.lag !== 0 || p.position !== p.head) && Date.now() < deadline;
        await sleep(100)
      ) {
        status = await projections(standby.url, API_TOKEN);
      }
      expect(status.map((p) => ({ name: p.name, lag: p.lag, state: p.state }))).toEqual([
        { name: 'menu', lag: 0, state: 'running' },
        { name: 'orders', lag: 0, state: 'running' },
      ]);
      const applied = await client.query(
        `SELECT (SELECT applied FROM proj_menu.checkpoint)::int AS menu, (SELECT applied FROM proj_orders.checkpoint)::int AS orders`,
      );
      expect(applied.rows[0]).toEqual({ menu: EVENTS, orders: EVENTS });

      const { problems, resources } = await apiVersusFold(standby.url, API_TOKEN, client, {
        product: 'products',
        trait: 'traits',
      });
      expect(problems.slice(0, 10)).toEqual([]);
      const subjects = new Set(
        load.deliveries.map((delivery) => {
          const { type, id } = (JSON.parse(delivery.body) as Json).data.relationships.subject.data;
          return `${type} ${id}`;
        }),
      );
      expect(resources).toBe(subjects.size);
      if (process.env.TEST_VERBOSE) {
        process.stderr.write(
          `[takeover] took ${takeoverMs} ms; attempts ${JSON.stringify(statusCounts(load.attempts))}\n`,
        );
      }
    },
    TEST_TIMEOUT_MS,
  );
});

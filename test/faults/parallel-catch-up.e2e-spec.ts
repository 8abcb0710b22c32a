import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { fold } from '../../src/domain/evolve.js';
import { LOCK_SPACES, SINGLE_LOCKS } from '../../src/database/advisory-locks.js';
import { EventLogRepository } from '../../src/event-log/event-log.repository.js';
import type { NewLogEntry } from '../../src/event-log/log-entry.js';
import { PROJECTIONS, ProjectionDefinition } from '../../src/projection/projection-definitions.js';
import { MENU_RESOURCE_TYPES } from '../../src/projection/published-changes.js';
import { DaemonProcess, sleep, daemonEnv } from '../support/daemon-process.js';
import { createTestDatabase, openDataSource, TestDatabase } from '../support/database.js';
import { newLogEntry, readLog } from '../support/event-log.js';
import {
  collection,
  destroyedEvent,
  Json,
  menuEvent,
  order,
  orderEvent,
  orderProduct,
  orderProductTraitOption,
  product,
  store,
  trait,
  traitOption,
  user,
} from '../support/menu-events.js';
import { apiVersusFold, projections } from './load.js';

/**
 * Issue 32, fault test: the projector catches the menu and the orders projections up in parallel,
 * each on a session of its own. A daemon catching up a backlog of tens of thousands of menu and
 * order events (while more keep being appended) is killed with SIGKILL at a random instant, three
 * times (KILLS); after each kill each projection's read model is the fold of exactly the entries up to its
 * own checkpoint, which applied each of them once, and the menu's change log agrees with its rows.
 * A last daemon catches up, and the query API equals the fold of the whole log.
 */

const SETUP_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 420_000;
const API_TOKEN = `parallel-token-${randomBytes(16).toString('hex')}`;
const BACKLOG = 30_000;
/** Appended while the killed daemon is down, before the next one starts. */
const WHILE_DOWN = 5_000;
/**
 * When each daemon is killed: at a random instant within `windowMs` after both lanes took their
 * locks and, from the second on, after a projection's checkpoint moved (the orders' page is the
 * smaller, so it usually commits first; the menu's, once caught up, is followed by live pages).
 */
const KILLS: Array<{ when: string; moved?: 'orders' | 'menu'; windowMs: number }> = [
  { when: 'while both catch up', windowMs: 2_000 },
  { when: 'once the orders caught up', moved: 'orders', windowMs: 300 },
  { when: 'among the live pages after the catch-up', moved: 'menu', windowMs: 1_500 },
];
const BASE = Date.parse('2024-06-01T08:00:00.000Z');

const report = (line: string) => {
  if (process.env.TEST_VERBOSE) process.stderr.write(`[parallel catch-up] ${line}\n`);
};

/** A deterministic stream of numbers in [0, 1) per event number. */
function randoms(n: number): () => number {
  let state = (n * 2654435761) >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ownerOf = (id: number) => String(5001 + (id % 3));

/**
 * Event n: about 10 % orders (with their products, options, store, user and a menu product that
 * must not touch the menu), 3 % destroys, the rest menu creates and updates, mostly products;
 * versions drawn up to two minutes back, so arrival order is not version order, some sharing an instant.
 */
function makeEvent(n: number): Json {
  const random = randoms(n);
  const pick = random();
  const instant = random() < 0.05 ? Math.floor((BASE + n * 1000) / 60_000) * 60_000 : BASE + n * 1000;
  const meta = { at: new Date(instant - Math.floor(random() * 120_000)), eventId: `parallel-${n}`, seq: n + 1 };
  if (pick < 0.1) {
    const id = 1 + Math.floor(random() * 1500);
    const products = Array.from({ length: 1 + (id % 2) }, (_, k) => `${id * 10 + k}`);
    const options = random() < 0.5 ? [`${id * 10 + 5}`] : [];
    const storeId = String(1 + (id % 4));
    const status = ['pending', 'accepted', 'ready'][Math.floor(random() * 3)];
    return orderEvent(
      n % 3 === 0 ? 'created' : 'updated',
      {
        user: user('77'),
        order: order(String(id), { status, orderProductIds: products, storeId, userId: '77' }),
        orderProducts: products.map((p) => orderProduct(p, { productId: '1', optionIds: options })),
        orderProductTraitOptions: options.map((o) => orderProductTraitOption(o, { traitOptionId: '1' })),
        products: [product('1', { title: `Order copy ${n}` })],
        store: store(storeId, { title: `Store ${storeId} r${n}` }),
      },
      { ...meta, ownerId: ownerOf(id) },
    );
  }
  if (pick < 0.13) {
    const id = 1 + Math.floor(random() * 2000);
    return destroyedEvent('product', String(id), { ...meta, ownerId: ownerOf(id) });
  }
  const kind = n % 7 === 0 ? 'created' : 'updated';
  if (pick < 0.23) {
    const id = 1 + Math.floor(random() * 800);
    return menuEvent(kind, traitOption(String(id), { title: `Option ${id} r${n}`, traitId: String(1 + (id % 200)) }), {
      ...meta,
      ownerId: ownerOf(id),
    });
  }
  if (pick < 0.31) {
    const id = 1 + Math.floor(random() * 200);
    return menuEvent(
      kind,
      trait(String(id), { title: `Trait ${id} r${n}`, optionIds: [String(id), String(id + 200)] }),
      {
        ...meta,
        ownerId: ownerOf(id),
      },
    );
  }
  if (pick < 0.33) {
    const id = 1 + Math.floor(random() * 50);
    return menuEvent(kind, collection(String(id), { title: `Collection ${id} r${n}`, productIds: [String(id)] }), {
      ...meta,
      ownerId: ownerOf(id),
    });
  }
  const id = 1 + Math.floor(random() * 2000);
  return menuEvent(
    kind,
    product(String(id), { title: `Product ${id} r${n}`, cents: 100 + (n % 900), traitIds: [String(1 + (id % 200))] }),
    { ...meta, ownerId: ownerOf(id) },
  );
}

/** The log entry ingress appends for a verified delivery of `body`. */
function entryOf(body: Json): NewLogEntry {
  const { data } = body;
  return newLogEntry({
    eventId: data.id,
    eventType: data.attributes.event_type,
    subjectType: data.relationships.subject.data.type,
    subjectId: data.relationships.subject.data.id,
    ownerId: data.relationships.resource_owner.data.id,
    occurredAt: data.attributes.created_at,
    seq: data.attributes.id,
    payload: JSON.stringify(body),
  });
}

/** Appends events from..to-1 in batches of 500, each batch one transaction (one group commit). */
async function append(log: EventLogRepository, from: number, to: number): Promise<void> {
  for (let n = from; n < to; n += 500) {
    const batch: NewLogEntry[] = [];
    for (let k = n; k < Math.min(n + 500, to); k++) batch.push(entryOf(makeEvent(k)));
    await log.append(batch);
  }
}

/** Small appends every few milliseconds, as deliveries keep coming, until stopped: returns the next event number. */
function trickle(log: EventLogRepository, from: number): { stop: () => Promise<number> } {
  let next = from;
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      await append(log, next, next + 25);
      next += 25;
      await sleep(15);
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await done;
      return next;
    },
  };
}

/** How many sessions hold the projector's lease and how many its lanes' locks. */
async function projectorLocks(client: pg.Client): Promise<{ lease: number; lanes: number }> {
  const { rows } = await client.query(
    `SELECT count(*) FILTER (WHERE l.classid = 0 AND l.objid = $1 AND l.objsubid = 1)::int AS lease,
            count(*) FILTER (WHERE l.classid = $2 AND l.objsubid = 2)::int AS lanes
       FROM pg_locks l JOIN pg_database d ON d.oid = l.database
      WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted`,
    [SINGLE_LOCKS.projector, LOCK_SPACES.projectorLane],
  );
  return rows[0];
}

async function until(what: string, condition: () => Promise<boolean>, ms = 60_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await condition()); await sleep(25))
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
}

interface Row {
  owner_id: string | null;
  deleted: boolean;
  attributes: unknown;
  relationships: unknown;
  event_id: string;
  position: number;
}

/**
 * In one snapshot: `projection`'s tables against the fold of the log entries up to its checkpoint
 * (its types only), the entries it applied against those up to its checkpoint, its parked events;
 * for the menu, the newest change of each resource against its row.
 */
async function projectionVersusFold(client: pg.Client, projection: ProjectionDefinition): Promise<string[]> {
  const [checkpoint] = (
    await client.query(
      `SELECT transaction_id::text AS "transactionId", position::text AS position, applied::int AS applied FROM ${projection.schema}.checkpoint`,
    )
  ).rows;
  const { entries, events } = await readLog(client, checkpoint);
  const problems: string[] = [];
  if (checkpoint.applied !== entries) problems.push(`${projection.name}: applied ${checkpoint.applied} of ${entries}`);
  const parked = (await client.query(`SELECT count(*)::int AS n FROM ${projection.schema}.parked_events`)).rows[0].n;
  if (parked !== 0) problems.push(`${projection.name}: ${parked} parked`);
  const types = new Map(projection.tables.map(({ type, table }) => [type as string, table]));
  const expected = new Map<string, Row>();
  for (const state of fold(events).values())
    if (types.has(state.type))
      expected.set(`${state.type} ${state.id}`, {
        owner_id: state.ownerId,
        deleted: state.deleted,
        attributes: state.attributes,
        relationships: state.relationships,
        event_id: state.version.eventId,
        position: state.position,
      });
  const actual = new Map<string, Row>();
  for (const [type, table] of types) {
    const { rows } = await client.query(
      `SELECT id, owner_id, deleted, attributes, relationships, event_id, position::int AS position FROM ${projection.schema}.${table}`,
    );
    for (const { id, ...row } of rows) actual.set(`${type} ${id}`, row);
  }
  for (const [key, want] of expected)
    if (!isDeepStrictEqual(actual.get(key), want))
      problems.push(`${key}: model ${JSON.stringify(actual.get(key))}, fold ${JSON.stringify(want)}`);
  for (const key of actual.keys()) if (!expected.has(key)) problems.push(`${key}: in the model, not in the fold`);
  if (projection.name === 'menu') problems.push(...(await changesVersusRows(client, actual)));
  return problems;
}

/** The newest change of each menu resource is its row (version position, op), and only rows have changes. */
async function changesVersusRows(client: pg.Client, rows: Map<string, Row>): Promise<string[]> {
  const { rows: newest } = await client.query(
    `SELECT DISTINCT ON (type, id) type, id, op, (resource -> 'version' ->> 'position')::int AS position
       FROM change_log WHERE type = ANY ($1::text[]) ORDER BY type, id, transaction_id DESC, seq DESC`,
    [MENU_RESOURCE_TYPES],
  );
  const problems: string[] = [];
  const changed = new Set<string>();
  for (const change of newest) {
    const key = `${change.type} ${change.id}`;
    changed.add(key);
    const row = rows.get(key);
    if (row === undefined) problems.push(`${key}: a change, no row`);
    else if (change.position !== row.position || change.op !== (row.deleted ? 'delete' : 'upsert'))
      problems.push(`${key}: newest change ${change.op} at ${change.position}, row at ${row.position}`);
  }
  for (const key of rows.keys()) if (!changed.has(key)) problems.push(`${key}: a row, no change`);
  return problems;
}

async function appliedNow(client: pg.Client): Promise<Record<'menu' | 'orders', number>> {
  const { rows } = await client.query(
    `SELECT (SELECT applied FROM proj_menu.checkpoint)::int AS menu, (SELECT applied FROM proj_orders.checkpoint)::int AS orders`,
  );
  return rows[0];
}

/** Both projections, in one REPEATABLE READ snapshot, against the fold. */
async function modelVersusFold(client: pg.Client): Promise<{ problems: string[]; applied: Record<string, number> }> {
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  try {
    const problems: string[] = [];
    for (const projection of PROJECTIONS) problems.push(...(await projectionVersusFold(client, projection)));
    return { problems, applied: await appliedNow(client) };
  } finally {
    await client.query('COMMIT');
  }
}

describe('fault: kill -9 a daemon catching up both projections in parallel (built daemon, child process)', () => {
  let database: TestDatabase;
  let dir: string;
  let client: pg.Client;
  let appender: DataSource;
  let log: EventLogRepository;

  const spawn = () =>
    DaemonProcess.spawn({
      cwd: dir,
      env: daemonEnv({
        DATABASE_URL: database.url,
        DATA_DIR: dir,
        WEBHOOK_KEYS: `parallel-${randomBytes(16).toString('hex')}`,
        API_TOKENS: API_TOKEN,
      }),
    });

  beforeAll(async () => {
    database = await createTestDatabase();
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-parallel-'));
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    appender = await openDataSource(database.url, 2);
    log = new EventLogRepository(appender);
  }, SETUP_TIMEOUT_MS);

  afterAll(async () => {
    await DaemonProcess.killAll();
    await appender?.destroy();
    await client?.end();
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(
    'killed at random instants, each projection stays the fold up to its own checkpoint; restarted, the API ends equal to the fold',
    async () => {
      await append(log, 0, BACKLOG);
      let next = BACKLOG;
      for (const kill of KILLS) {
        const before = await appliedNow(client);
        const daemon = await spawn();
        await until(
          'both lanes hold their locks',
          async () => (await projectorLocks(client)).lanes === PROJECTIONS.length,
        );
        const appending = trickle(log, next);
        const moved = kill.moved;
        if (moved !== undefined)
          await until(
            `the ${moved} checkpoint moves`,
            async () => (await appliedNow(client))[moved] > before[moved],
            120_000,
          );
        const delay = Math.floor(Math.random() * kill.windowMs);
        await sleep(delay);
        daemon.kill('SIGKILL');
        expect(await daemon.waitForExit(10_000)).toEqual({ code: null, signal: 'SIGKILL' });
        next = await appending.stop();
        // A killed client's backend ends its statement, then its session: its page rolls back, its locks go.
        await until('the killed projector sessions ended', async () => {
          const locks = await projectorLocks(client);
          return locks.lease === 0 && locks.lanes === 0;
        });
        const { problems, applied } = await modelVersusFold(client);
        expect(problems.slice(0, 10)).toEqual([]);
        report(`killed ${kill.when}, ${delay} ms in: applied ${JSON.stringify(applied)} of ${next} entries`);
        await append(log, next, next + WHILE_DOWN);
        next += WHILE_DOWN;
      }

      const daemon = await spawn();
      const appending = trickle(log, next);
      await daemon.waitUntilReady(150_000);
      next = await appending.stop();
      const total = next;
      let status = await projections(daemon.url, API_TOKEN);
      await until(
        'both projections at the head',
        async () => {
          status = await projections(daemon.url, API_TOKEN);
          return status.every((p) => p.lag === 0 && p.position === p.head);
        },
        120_000,
      );
      expect(status.map(({ name, lag, state }) => ({ name, lag, state }))).toEqual([
        { name: 'menu', lag: 0, state: 'running' },
        { name: 'orders', lag: 0, state: 'running' },
      ]);
      const { problems, applied } = await modelVersusFold(client);
      expect(problems.slice(0, 10)).toEqual([]);
      expect(applied).toEqual({ menu: total, orders: total });
      const api = await apiVersusFold(daemon.url, API_TOKEN, client, {
        collection: 'collections',
        product: 'products',
        trait: 'traits',
        trait_option: 'trait_options',
        order: 'orders',
        order_product: 'order_products',
        store: 'stores',
      });
      expect(api.problems.slice(0, 10)).toEqual([]);
      report(`final: ${total} entries, ${api.resources} resources through the API`);
    },
    TEST_TIMEOUT_MS,
  );
});

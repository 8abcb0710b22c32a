import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { fold, ResourceState } from '../src/domain/evolve.js';
import { CliProcess, CliResult, describeRun, runCli, spawnCli } from './support/cli.js';
import { Answer, api, deliver, RunningDaemon, startDaemon } from './support/http.js';
import {
  collection,
  destroyedEvent,
  Json,
  menuEvent,
  orderEvent,
  orderProduct,
  orderProductTraitOption,
  product,
  Resource,
  store,
  trait,
  traitOption,
  user,
} from './support/menu-events.js';
import { eventually } from './support/eventually.js';
import { readLog } from './support/event-log.js';

/**
 * docs/reference.md §4 and §8: `menu-sync replay` rebuilds the projections from the whole log into shadow
 * schemas while the daemon keeps ingesting, projecting and serving, then swaps them in; afterwards
 * the read model is the fold of every event in the log, nothing applied twice. A replay killed
 * half-way leaves the live model untouched and the projector unblocked, and a rerun succeeds.
 * `menu-sync verify` says "identical" on a healthy model and names each hand-made difference.
 * A replay cut off from the database after its swap committed must not leave anything that makes
 * the next replay fail (docs/reference.md §8: "interrupted → … a rerun starts cleanly").
 * One daemon (a child process) on a fresh database for the file; the CLI runs as child processes
 * beside it. The log holds ~3 000 deliveries made over HTTP plus ~50 000 events of history written
 * straight into event_log in the daemon's own row shape, so that a rebuild lasts long enough for
 * deliveries, queries and a SIGKILL to land in the middle of it.
 *
 * REPLAY_VERBOSE=1 prints timings and counts.
 */

const OWNERS = 5;
const ownerOf = (id: string | number) => `replay-owner-${Number(id) % OWNERS}`;
/** Resource id ranges of the history; ids 1..STABLE are products that exist throughout (never destroyed). */
const COUNTS = { product: 1500, trait: 200, trait_option: 400, collection: 60 } as const;
const MENU_TYPES = Object.keys(COUNTS) as Array<keyof typeof COUNTS>;
const STABLE = 20;
const ORDERS = 300;
const HISTORY_EVENTS = 50_000;
/** The pace of the sender that delivers during a replay. */
const SENDER_RATE_PER_S = 200;
const SENDER_WORKERS = 16;

const TABLES: Record<string, string> = {
  collection: 'proj_menu.collections',
  product: 'proj_menu.products',
  trait: 'proj_menu.traits',
  trait_option: 'proj_menu.trait_options',
  order: 'proj_orders.orders',
  order_product: 'proj_orders.order_products',
  order_product_trait_option: 'proj_orders.order_product_trait_options',
  store: 'proj_orders.stores',
};

const verbose = (line: string) => {
  if (process.env.REPLAY_VERBOSE) process.stderr.write(`[replay] ${line}\n`);
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A small seeded PRNG (mulberry32): the same log on every run. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = prng(20240501);
const pick = (n: number) => Math.floor(random() * n);

const BASE = Date.parse('2024-05-01T10:00:00.000Z');
/** An instant `seconds` after a fixed base (whole milliseconds: JS dates and the fold have no finer grain). */
const when = (seconds: number) => new Date(BASE + Math.round(seconds * 1000)).toISOString();

let eventCounter = 0;
/** Distinct, sortable event ids (data.id compares bytewise as the last part of the version). */
const eventId = (prefix: string) => `${prefix}-${String(++eventCounter).padStart(8, '0')}`;

/** A menu resource at revision `rev`, its links pointing into the other id ranges. */
function menuResource(type: keyof typeof COUNTS, id: string, rev: number): Resource {
  const n = Number(id);
  switch (type) {
    case 'product':
      return product(id, {
        title: `Product ${id} r${rev}`,
        cents: 100 + (rev % 50) * 10,
        available: rev % 7 !== 0,
        traitIds: [String(1 + (n % COUNTS.trait)), String(1 + ((n * 7) % COUNTS.trait))],
      });
    case 'trait':
      return trait(id, {
        title: `Trait ${id} r${rev}`,
        optionIds: [String(1 + (n % COUNTS.trait_option)), String(1 + ((n * 3) % COUNTS.trait_option))],
      });
    case 'trait_option':
      return traitOption(id, {
        title: `Option ${id} r${rev}`,
        traitId: String(1 + (n % COUNTS.trait)),
        cents: rev % 500,
      });
    case 'collection':
      return collection(id, {
        title: `Collection ${id} r${rev}`,
        productIds: [0, 1, 2, 3].map((k) => String(1 + ((n * 11 + k) % COUNTS.product))),
      });
  }
}

/**
 * order.created/updated: the order, two order products with a trait option each, the store, the
 * user — and menu resources (products, a trait option) that must not change the menu (docs/reference.md §4).
 */
function orderDelivery(
  kind: 'created' | 'updated',
  orderId: number,
  rev: number,
  at: string,
  seq: number,
  id = eventId('order'),
): Json {
  const lines = [1, 2].map((j) => {
    const productId = String(1 + ((orderId * 13 + j) % COUNTS.product));
    const optionId = String(1 + ((orderId + j) % COUNTS.trait_option));
    const opto = orderProductTraitOption(String(orderId * 100 + j), { traitOptionId: optionId });
    return {
      op: orderProduct(String(orderId * 10 + j), { productId, optionIds: [opto.id], quantity: 1 + (rev % 3) }),
      opto,
      product: product(productId, { title: `as ordered r${rev}` }),
      option: traitOption(optionId, { title: `as ordered r${rev}` }),
    };
  });
  const storeId = String(1 + (orderId % 5));
  return orderEvent(
    kind,
    {
      user: user(String(9000 + (orderId % 50))),
      order: order(
        String(orderId),
        lines.map((line) => line.op.id),
        storeId,
        rev,
      ),
      orderProducts: lines.map((line) => line.op),
      orderProductTraitOptions: lines.map((line) => line.opto),
      traitOptions: lines.map((line) => line.option),
      products: lines.map((line) => line.product),
      store: store(storeId, { title: `Store ${storeId} r${rev}` }),
    },
    { at, ownerId: ownerOf(orderId), eventId: id, seq },
  );
}

function order(id: string, orderProductIds: string[], storeId: string, rev: number): Resource {
  const statuses = ['pending', 'accepted', 'ready', 'collected'];
  return {
    id,
    type: 'order',
    attributes: {
      id: Number(id),
      status: statuses[rev % statuses.length],
      note: rev % 3 === 0 ? null : `note r${rev}`,
      total: { cents: 1200 + rev },
    },
    relationships: {
      order_products: { data: orderProductIds.map((opId) => ({ id: opId, type: 'order_product' })) },
      store: { data: { id: storeId, type: 'store' } },
      user: { data: { id: '9000', type: 'user' } },
    },
  };
}

/** The ~3 000 deliveries made over HTTP before any replay, in three waves. */
function httpDeliveries(): { waves: Json[][]; duplicates: Json[] } {
  const creates: Json[] = [];
  for (const type of MENU_TYPES) {
    for (let n = 1; n <= COUNTS[type]; n++) {
      const id = String(n);
      creates.push(
        menuEvent('created', menuResource(type, id, 0), {
          at: when(n % 97),
          ownerId: ownerOf(id),
          eventId: eventId(`c-${type}`),
          seq: 1,
        }),
      );
    }
  }
  const changes: Json[] = [];
  for (let k = 0; k < 700; k++) {
    const type = MENU_TYPES[k % MENU_TYPES.length];
    const id = String(1 + pick(COUNTS[type]));
    if (k % 5 === 4 && !(type === 'product' && Number(id) <= STABLE)) {
      changes.push(
        destroyedEvent(type, id, { at: when(3000 + k), ownerId: ownerOf(id), eventId: eventId(`d-${type}`), seq: 2 }),
      );
    } else {
      changes.push(
        menuEvent('updated', menuResource(type, id, 1000 + k), {
          at: when(3000 + k),
          ownerId: ownerOf(id),
          eventId: eventId(`u-${type}`),
          seq: 2,
        }),
      );
    }
  }
  for (let orderId = 1; orderId <= 100; orderId++) {
    changes.push(orderDelivery('created', orderId, 0, when(3000 + orderId), 1));
    changes.push(orderDelivery('updated', orderId, 1, when(3500 + orderId), 2));
  }
  // Out of order: older than what is already there (they change nothing), and a few older destroys.
  const stale: Json[] = [];
  for (let k = 0; k < 200; k++) {
    const type = MENU_TYPES[k % MENU_TYPES.length];
    const id = String(1 + pick(COUNTS[type]));
    stale.push(
      k % 10 === 9 && !(type === 'product' && Number(id) <= STABLE)
        ? destroyedEvent(type, id, { at: when(1), ownerId: ownerOf(id), eventId: eventId(`sd-${type}`), seq: 0 })
        : menuEvent('updated', menuResource(type, id, 500 + k), {
            at: when(2),
            ownerId: ownerOf(id),
            eventId: eventId(`s-${type}`),
            seq: 0,
          }),
    );
  }
  for (let orderId = 1; orderId <= 50; orderId++) stale.push(orderDelivery('updated', orderId, 99, when(3000), 0));
  // Exact repeats of events already delivered: `200 duplicate`, nothing new in the log.
  const duplicates = [...creates.slice(0, 60), ...changes.slice(0, 60)];
  return { waves: [creates, changes, stale], duplicates };
}

interface HistoryRow {
  eventId: string;
  eventType: string;
  subjectType: string;
  subjectId: string;
  ownerId: string;
  occurredAt: string;
  eventSeq: string | null;
  payload: string;
}

/**
 * History written straight into event_log: random versions over the same resources (ties on
 * occurred_at and on attributes.id included, some without attributes.id), destroys and orders.
 */
function historyRows(count: number): HistoryRow[] {
  const rows: HistoryRow[] = [];
  for (let k = 0; k < count; k++) {
    const seconds = pick(4000);
    const seq = 1 + pick(4);
    let body: Json;
    if (k % 25 === 0) {
      body = orderDelivery(
        k % 2 === 0 ? 'created' : 'updated',
        1 + pick(ORDERS),
        k,
        when(seconds),
        seq,
        eventId('h-order'),
      );
    } else {
      const type = MENU_TYPES[pick(MENU_TYPES.length)];
      const id = String(1 + pick(COUNTS[type]));
      const meta = { at: when(seconds), ownerId: ownerOf(id), eventId: eventId(`h-${type}`), seq };
      const roll = random();
      body =
        roll < 0.08 && !(type === 'product' && Number(id) <= STABLE)
          ? destroyedEvent(type, id, meta)
          : menuEvent(roll < 0.2 ? 'created' : 'updated', menuResource(type, id, k), meta);
    }
    if (k % 50 === 7) delete body.data.attributes.id;
    const seqValue = body.data.attributes.id;
    rows.push({
      eventId: body.data.id,
      eventType: body.data.attributes.event_type,
      subjectType: body.data.relationships.subject.data.type,
      subjectId: body.data.relationships.subject.data.id,
      ownerId: body.data.relationships.resource_owner.data.id,
      occurredAt: body.data.attributes.created_at,
      eventSeq: seqValue === undefined ? null : String(seqValue),
      payload: JSON.stringify(body),
    });
  }
  return rows;
}

/**
 * Events no projection can apply, to be parked — by the daemon and by every rebuild alike — and
 * never dropped (docs/reference.md §4): an update whose `included` lacks its subject (it holds another
 * product instead), an order event whose `included` holds no order. (A `\u0000` escape, which
 * jsonb refuses, is left out: it sends its whole page down the one-entry-at-a-time slow path, and
 * a rebuild of this log would take minutes instead of seconds — a 20 000-entry log with one such
 * event replays in ~40 s instead of ~0.3 s.)
 */
function poisonRows(): { rows: HistoryRow[]; menu: string[]; orders: string[] } {
  const row = (body: Json): HistoryRow => ({
    eventId: body.data.id,
    eventType: body.data.attributes.event_type,
    subjectType: body.data.relationships.subject.data.type,
    subjectId: body.data.relationships.subject.data.id,
    ownerId: body.data.relationships.resource_owner.data.id,
    occurredAt: body.data.attributes.created_at,
    eventSeq: String(body.data.attributes.id),
    payload: JSON.stringify(body),
  });
  const missing = menuEvent('updated', product('6', { title: 'never shown' }), {
    at: when(90_000),
    ownerId: ownerOf(6),
    eventId: 'poison-missing',
    seq: 9,
  });
  missing.included = [product('7', { title: 'never shown either' })];
  const orderless = orderDelivery('created', 7, 0, when(90_000), 9, 'poison-orderless');
  orderless.included = orderless.included.filter((resource: Resource) => resource.type === 'user');
  return { rows: [row(missing), row(orderless)], menu: ['poison-missing'], orders: ['poison-orderless'] };
}
const POISON = poisonRows();

/** Appends rows the way EventLogRepository does (one statement per batch, payload as json, its sha256). */
async function insertHistory(client: pg.Client, rows: HistoryRow[], batch = 5000): Promise<void> {
  for (let i = 0; i < rows.length; i += batch) {
    const slice = rows.slice(i, i + batch);
    const column = <T>(fn: (row: HistoryRow) => T) => slice.map(fn);
    await client.query(
      `WITH input AS (
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::numeric[],
                              $8::text[], $9::bytea[]) WITH ORDINALITY
                AS input (event_id, event_type, subject_type, subject_id, owner_id, occurred_at, event_seq, payload, sha256, ord)),
       claimed AS (
         INSERT INTO event_ids (event_id, position)
         SELECT event_id, nextval('event_log_position_seq') FROM (SELECT event_id FROM input ORDER BY ord) AS ordered
         ON CONFLICT (event_id) DO NOTHING RETURNING event_id, position)
       INSERT INTO event_log (position, event_id, event_type, subject_type, subject_id, owner_id, occurred_at, event_seq, source,
                              handled, received_at, key_id, content_type, payload, raw_body, sha256)
       SELECT claimed.position, event_id, event_type, subject_type, subject_id, owner_id, occurred_at, event_seq, 'import', true,
              now(), NULL, 'application/json', payload::json, NULL, sha256
         FROM input JOIN claimed USING (event_id)`,
      [
        column((r) => r.eventId),
        column((r) => r.eventType),
        column((r) => r.subjectType),
        column((r) => r.subjectId),
        column((r) => r.ownerId),
        column((r) => r.occurredAt),
        column((r) => r.eventSeq),
        column((r) => r.payload),
        column((r) => createHash('sha256').update(r.payload, 'utf8').digest()),
      ],
    );
  }
}

/** Comparable form of a resource: what the fold says, or what a read-model row holds. */
interface Comparable {
  key: string;
  owner_id: string | null;
  deleted: boolean;
  attributes: unknown;
  relationships: unknown;
  event_id: string;
  occurred_at: number;
  position: number;
}

function fromState(state: ResourceState): Comparable {
  return {
    key: `${state.type} ${state.id}`,
    owner_id: state.ownerId,
    deleted: state.deleted,
    attributes: state.attributes,
    relationships: state.relationships,
    event_id: state.version.eventId,
    occurred_at: state.version.occurredAt.getTime(),
    position: state.position,
  };
}

async function readModel(client: pg.Client): Promise<Map<string, Comparable>> {
  const model = new Map<string, Comparable>();
  for (const [type, table] of Object.entries(TABLES)) {
    const { rows } = await client.query(
      `SELECT id, owner_id, deleted, attributes, relationships, event_id, occurred_at, position::text AS position FROM ${table}`,
    );
    for (const row of rows) {
      const key = `${type} ${row.id}`;
      model.set(key, {
        key,
        owner_id: row.owner_id,
        deleted: row.deleted,
        attributes: row.attributes,
        relationships: row.relationships,
        event_id: row.event_id,
        occurred_at: (row.occurred_at as Date).getTime(),
        position: Number(row.position),
      });
    }
  }
  return model;
}

/**
 * The read model is the fold of the whole log (same resources; per resource the same deleted,
 * attributes, relationships, owner and version), and each projection's checkpoint has applied
 * every log entry exactly once.
 */
async function expectModelEqualsFold(client: pg.Client): Promise<{ resources: number; entries: number }> {
  const started = Date.now();
  const parked = await client.query(
    `SELECT (SELECT coalesce(array_agg(event_id ORDER BY event_id), '{}') FROM proj_menu.parked_events) AS menu,
            (SELECT coalesce(array_agg(event_id ORDER BY event_id), '{}') FROM proj_orders.parked_events) AS orders`,
  );
  expect(parked.rows[0]).toEqual({ menu: [...POISON.menu].sort(), orders: [...POISON.orders].sort() });
  const { events: all, entries } = await readLog(client);
  const unappliable = new Set([...POISON.menu, ...POISON.orders]);
  const events = all.filter((event) => !unappliable.has(event.eventId));
  const expected = new Map([...fold(events).values()].map((state) => [`${state.type} ${state.id}`, fromState(state)]));
  const actual = await readModel(client);
  const problems: string[] = [];
  for (const [key, want] of expected) {
    const got = actual.get(key);
    if (!got) problems.push(`${key}: missing from the read model`);
    else if (!isDeepStrictEqual(got, want))
      problems.push(`${key}: read model ${JSON.stringify(got)}\n  fold ${JSON.stringify(want)}`);
  }
  for (const key of actual.keys()) if (!expected.has(key)) problems.push(`${key}: in the read model, not in the fold`);
  expect(problems.slice(0, 10)).toEqual([]);
  expect(actual.size).toBe(expected.size);
  const { rows } = await client.query(
    `SELECT (SELECT applied FROM proj_menu.checkpoint)::int AS menu, (SELECT applied FROM proj_orders.checkpoint)::int AS orders,
            (SELECT count(*) FROM event_log)::int AS entries`,
  );
  expect(rows[0]).toEqual({ menu: entries, orders: entries, entries });
  verbose(`model = fold of ${entries} entries (${expected.size} resources) checked in ${Date.now() - started} ms`);
  return { resources: expected.size, entries };
}

/** Every table of both live schemas, sorted, with the checkpoints: a snapshot to compare. */
async function snapshot(client: pg.Client): Promise<string> {
  const parts: unknown[] = [];
  for (const table of [
    ...Object.values(TABLES),
    'proj_menu.checkpoint',
    'proj_orders.checkpoint',
    'proj_menu.parked_events',
    'proj_orders.parked_events',
  ]) {
    const { rows } = await client.query(`SELECT to_jsonb(t) AS row FROM ${table} t ORDER BY to_jsonb(t)::text`);
    parts.push({ table, rows: rows.map((row) => row.row) });
  }
  return JSON.stringify(parts);
}

async function shadowSchemas(client: pg.Client): Promise<string[]> {
  const { rows } = await client.query(
    `SELECT nspname FROM pg_namespace WHERE nspname ~ '^proj_(menu|orders)__' AND nspname !~ '__(ckpt_|archive_base$)' ORDER BY nspname`,
  );
  return rows.map((row) => row.nspname);
}

describe('replay and verify beside a running daemon (docs/reference.md §4, §8)', () => {
  let app: RunningDaemon;
  let db: pg.Client;
  let cliEnv: Record<string, string>;
  const cli = (args: string[]) => spawnCli(args, cliEnv, app.process.cwd);
  const run = (args: string[], timeoutMs = 60000) => runCli(args, cliEnv, app.process.cwd, timeoutMs);

  async function post(event: Json, expected: number): Promise<Answer> {
    const answer = await deliver(app.url, event);
    if (answer.status !== expected)
      throw new Error(`delivery of ${event.data.id} answered ${answer.status}, expected ${expected}: ${answer.text}`);
    return answer;
  }

  async function postAll(events: Json[], expected: number, concurrency = 16): Promise<void> {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < events.length) await post(events[next++], expected);
      }),
    );
  }

  /** Every projection has read the whole log. */
  async function caughtUp(timeoutMs = 30000): Promise<Json[]> {
    return eventually(
      async () => {
        const status = await api(app.url, '/api/v1/projections');
        expect(status.status).toBe(200);
        expect(status.json.data.map((p: Json) => [p.name, p.lag])).toEqual([
          ['menu', 0],
          ['orders', 0],
        ]);
        return status.json.data;
      },
      timeoutMs,
      100,
    );
  }

  let liveCounter = 0;
  /** Events newer than the whole history, for deliveries made while a replay runs. */
  function liveEvent(): Json {
    const k = ++liveCounter;
    const at = when(100_000 + k);
    const meta = (id: string) => ({ at, ownerId: ownerOf(id), eventId: eventId('live'), seq: 1 });
    switch (k % 10) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const id = String(1 + (k % STABLE));
        return menuEvent('updated', menuResource('product', id, 100_000 + k), meta(id));
      }
      case 4:
      case 5: {
        const id = String(100_000 + k);
        return menuEvent('created', menuResource('product', id, k), meta(id));
      }
      case 6: {
        // The product created by the previous event (another worker may deliver it later: arrival order does not matter).
        const id = String(100_000 + k - 1);
        return destroyedEvent('product', id, meta(id));
      }
      case 7: {
        const id = String(1 + (k % COUNTS.trait_option));
        return menuEvent('updated', menuResource('trait_option', id, 100_000 + k), meta(id));
      }
      case 8: {
        const id = String(1 + (k % COUNTS.collection));
        return menuEvent('updated', menuResource('collection', id, 100_000 + k), meta(id));
      }
      default:
        return orderDelivery('updated', 1 + (k % ORDERS), 100_000 + k, at, 1, eventId('live-order'));
    }
  }

  beforeAll(async () => {
    const started = Date.now();
    app = await startDaemon({ LOG_LEVEL: 'info' });
    cliEnv = {
      DATABASE_URL: app.database.url,
      TOKEN_ENCRYPTION_KEY: app.process.env.TOKEN_ENCRYPTION_KEY,
      LOG_LEVEL: 'info',
    };
    db = new pg.Client({ connectionString: app.database.url });
    await db.connect();

    const { waves, duplicates } = httpDeliveries();
    for (const wave of waves) await postAll(wave, 202);
    await postAll(duplicates, 200);
    const delivered = waves.reduce((sum, wave) => sum + wave.length, 0);
    verbose(`${delivered} deliveries + ${duplicates.length} duplicates over HTTP in ${Date.now() - started} ms`);

    const history = historyRows(HISTORY_EVENTS - POISON.rows.length);
    history.splice(HISTORY_EVENTS / 2, 0, ...POISON.rows);
    const inserted = Date.now();
    await insertHistory(db, history);
    verbose(`${history.length} history events inserted in ${Date.now() - inserted} ms`);
    await caughtUp(60000);
    const { rows } = await db.query('SELECT count(*)::int AS n FROM event_log');
    expect(rows[0].n).toBe(delivered + HISTORY_EVENTS);
    verbose(`set-up done in ${Date.now() - started} ms`);
  }, 110000);

  afterAll(async () => {
    await CliProcess.killAll();
    await db?.end();
    if (process.env.REPLAY_VERBOSE) {
      verbose(
        app?.process.logs
          .split('\n')
          .filter((line) => /"level":"(error|warn)"/.test(line))
          .join('\n') ?? '',
      );
    }
    await app?.close();
  });

  it('refuses an unknown projection name with exit code 2', async () => {
    for (const command of ['replay', 'verify']) {
      const result = await run([command, '--projection', 'nope']);
      expect({ code: result.code, output: result.stderr }).toEqual({
        code: 2,
        output: expect.stringContaining('--projection must be'),
      });
    }
    expect(await shadowSchemas(db)).toEqual([]);
  }, 30000);

  it('verify exits 0 and says "identical" for a model the daemon projected', async () => {
    // The daemon's own projection of the log (deliveries in any order, duplicates, history) is the fold.
    await expectModelEqualsFold(db);
    const result = await run(['verify']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^menu: identical to a rebuild from the log$/m);
    expect(result.stdout).toMatch(/^orders: identical to a rebuild from the log$/m);
    expect(await shadowSchemas(db)).toEqual([]);
  }, 60000);

  it('replay while deliveries keep arriving: the query API answers 200 throughout and the result is the fold of the whole log', async () => {
    const entriesBefore = (await db.query('SELECT count(*)::int AS n FROM event_log')).rows[0].n as number;

    // The sender: SENDER_RATE_PER_S deliveries a second, newer than everything, each noting when it was answered.
    let sending = true;
    const sent: Array<{ t: number; status: number; id: string }> = [];
    const interval = (1000 * SENDER_WORKERS) / SENDER_RATE_PER_S;
    const senders = Array.from({ length: SENDER_WORKERS }, async (_, w) => {
      let due = Date.now() + (w * interval) / SENDER_WORKERS;
      while (sending) {
        await sleep(Math.max(0, due - Date.now()));
        due += interval;
        const event = liveEvent();
        let status: number;
        try {
          status = (await deliver(app.url, event)).status;
        } catch {
          status = 0;
        }
        sent.push({ t: Date.now(), status, id: event.data.id });
      }
    });

    // The pollers: the menu of one owner, a page of products, and products that exist throughout.
    let polling = true;
    const polls: Array<{ t: number; path: string; status: number; body: string }> = [];
    const pollLoop = async (path: (i: number) => string) => {
      for (let i = 0; polling; i++) {
        const p = path(i);
        let answer: Answer | undefined;
        try {
          answer = await api(app.url, p);
        } catch (error) {
          polls.push({ t: Date.now(), path: p, status: 0, body: String(error) });
          continue;
        }
        polls.push({
          t: Date.now(),
          path: p,
          status: answer.status,
          body: answer.status === 200 ? '' : answer.text.slice(0, 300),
        });
      }
    };
    const pollers = [
      pollLoop(() => `/api/v1/menu?owner_id=${ownerOf(1)}`),
      pollLoop(() => '/api/v1/products?limit=50'),
      pollLoop((i) => `/api/v1/products/${1 + (i % STABLE)}`),
      pollLoop((i) => `/api/v1/products/${1 + ((i + 7) % STABLE)}?expand=traits`),
      // as_of reads the projection's checkpoint inside its statement (menu_sync_unprojected_menu_ids): across the swap too.
      pollLoop((i) => `/api/v1/products/${1 + ((i + 3) % STABLE)}?as_of=2100-01-01T00:00:00Z`),
    ];

    // When each shadow schema existed (the rebuild proper), seen from the database.
    let watching = true;
    const shadowSeen: number[] = [];
    const watcher = (async () => {
      const client = new pg.Client({ connectionString: app.database.url });
      await client.connect();
      try {
        while (watching) {
          const { rows } = await client.query(
            `SELECT to_regnamespace('proj_menu__shadow') IS NOT NULL OR to_regnamespace('proj_orders__shadow') IS NOT NULL AS shadow`,
          );
          if (rows[0].shadow) shadowSeen.push(Date.now());
          await sleep(10);
        }
      } finally {
        await client.end();
      }
    })();

    await sleep(300);
    const replay = cli(['replay']);
    let result: CliResult;
    try {
      result = await replay.wait(60000);
    } finally {
      await sleep(300);
      sending = false;
      polling = false;
      watching = false;
      await Promise.all([...senders, ...pollers, watcher]);
    }
    expect({ code: result.code, run: result.code === 0 ? '' : describeRun(result) }).toEqual({ code: 0, run: '' });
    // Each projection rebuilt from at least the whole log as it was, its unappliable events parked again.
    const rebuilt = (name: string) =>
      Number(
        new RegExp(`^${name}: rebuilt from (\\d+) log entries .*, (\\d+) parked, swapped in$`, 'm').exec(
          result.stdout,
        )?.[1],
      );
    expect(rebuilt('menu')).toBeGreaterThanOrEqual(entriesBefore);
    expect(rebuilt('orders')).toBeGreaterThanOrEqual(entriesBefore);
    expect(result.stdout).toMatch(new RegExp(`^menu: .*, ${POISON.menu.length} parked, swapped in$`, 'm'));
    expect(result.stdout).toMatch(new RegExp(`^orders: .*, ${POISON.orders.length} parked, swapped in$`, 'm'));
    const replayMs = result.endedAt - result.startedAt;
    const inReplay = sent.filter((s) => s.t >= replay.startedAt && s.t <= result.endedAt).length;
    verbose(
      `replay: ${replayMs} ms; shadow seen for ${shadowSeen.length ? shadowSeen.at(-1)! - shadowSeen[0] : 0} ms; ` +
        `${sent.length} deliveries (${Math.round((inReplay * 1000) / replayMs)}/s during the replay), ${polls.length} polls`,
    );

    // The sending and polling genuinely overlapped the rebuild (how many per second is a speed
    // figure, printed above with VERBOSE, not a pass/fail condition).
    expect(shadowSeen.length).toBeGreaterThan(0);
    const [from, to] = [shadowSeen[0], shadowSeen.at(-1)!];
    const during = <T extends { t: number }>(items: T[]) => items.filter((item) => item.t >= from && item.t <= to);
    expect(during(sent).filter((s) => s.status === 202).length).toBeGreaterThan(0);
    expect(during(polls).filter((p) => p.path.startsWith('/api/v1/menu')).length).toBeGreaterThan(0);
    expect(during(polls).filter((p) => p.path.startsWith('/api/v1/products/')).length).toBeGreaterThan(0);
    expect(during(polls).filter((p) => p.path.includes('as_of=')).length).toBeGreaterThan(0);

    // Every delivery accepted, every query answered 200, before, during and after the swap.
    expect(sent.filter((s) => s.status !== 202)).toEqual([]);
    expect(polls.filter((p) => p.status !== 200).slice(0, 10)).toEqual([]);

    // Afterwards: the shadows are gone, the daemon caught up, and the model is the fold of the whole log.
    expect(await shadowSchemas(db)).toEqual([]);
    await caughtUp();
    const { entries } = await expectModelEqualsFold(db);
    expect(entries).toBe(entriesBefore + sent.length);
    // The last updates of the stable products won: the API shows them.
    const latest = new Map<string, number>();
    for (let k = 1; k <= liveCounter; k++) if (k % 10 <= 3) latest.set(String(1 + (k % STABLE)), 100_000 + k);
    for (const [id, rev] of latest) {
      const answer = await api(app.url, `/api/v1/products/${id}`);
      expect({ id, status: answer.status, title: answer.json?.attributes?.title }).toEqual({
        id,
        status: 200,
        title: `Product ${id} r${rev}`,
      });
      expect((await api(app.url, `/api/v1/products/${id}?as_of=2100-01-01T00:00:00Z`)).json).toEqual(answer.json);
    }
  }, 90000);

  it('a replay SIGKILLed half-way leaves the live model untouched and the projector unblocked; a rerun succeeds', async () => {
    await caughtUp();
    const before = await snapshot(db);
    const schemaOid = (await db.query(`SELECT 'proj_menu'::regnamespace::oid::int AS oid`)).rows[0].oid;

    const replay = cli(['replay', '--projection', 'menu']);
    // Half-way: the shadow schema exists and the rebuild is filling it — a first page committed into
    // it, or 300 ms spent on one, whichever comes first (pages are large: there may be only two).
    let shadowRows = 0;
    let shadowSince: number | undefined;
    while (replay.running && shadowRows === 0 && (shadowSince === undefined || Date.now() - shadowSince < 300)) {
      try {
        const { rows } = await db.query(`SELECT to_regclass('proj_menu__shadow.products') IS NOT NULL AS present`);
        if (rows[0].present) {
          shadowSince ??= Date.now();
          shadowRows = (await db.query('SELECT count(*)::int AS n FROM proj_menu__shadow.products')).rows[0].n;
        }
      } catch {
        // Dropped or renamed between the two queries.
      }
      await sleep(5);
    }
    replay.kill('SIGKILL');
    const killed = await replay.wait(10000);
    expect({
      signal: killed.signal,
      shadowSeen: shadowSince !== undefined,
      output: killed.signal === 'SIGKILL' ? '' : describeRun(killed),
    }).toEqual({ signal: 'SIGKILL', shadowSeen: true, output: '' });
    // It died in the middle: its shadow is left behind, never swapped in.
    expect(await shadowSchemas(db)).toEqual(['proj_menu__shadow']);
    verbose(
      `killed the replay ${killed.endedAt - killed.startedAt} ms after start, ${Date.now() - shadowSince!} ms after its shadow appeared, ` +
        `${shadowRows} rows committed in the shadow`,
    );

    // The live schema is the same one, with the same rows and checkpoints.
    expect((await db.query(`SELECT 'proj_menu'::regnamespace::oid::int AS oid`)).rows[0].oid).toBe(schemaOid);
    expect(await snapshot(db)).toBe(before);

    // The daemon's projector is not blocked by anything the killed replay held: new deliveries are projected.
    const checkpointBefore = (await db.query('SELECT position::int AS p FROM proj_menu.checkpoint')).rows[0].p;
    const fresh: Json[] = Array.from({ length: 30 }, () => liveEvent());
    await postAll(fresh, 202, 4);
    const status = await caughtUp(15000);
    expect(status.find((p: Json) => p.name === 'menu').position).toBeGreaterThan(checkpointBefore);
    const update = fresh.find((event) => event.data.attributes.event_type === 'product.updated')!;
    const shown = await api(app.url, `/api/v1/products/${update.data.relationships.subject.data.id}`);
    expect(shown.status).toBe(200);
    expect(shown.json.version.event_id >= update.data.id).toBe(true);

    // A rerun starts cleanly (whatever the killed one left behind) and swaps in the fold.
    const rerun = await run(['replay']);
    expect({ code: rerun.code, run: rerun.code === 0 ? '' : describeRun(rerun) }).toEqual({ code: 0, run: '' });
    expect(await shadowSchemas(db)).toEqual([]);
    await caughtUp();
    await expectModelEqualsFold(db);
  }, 90000);

  it('verify names a row altered or deleted by hand (exit 1), and says "identical" again after a replay', async () => {
    // The previous test left the model equal to the fold; by hand, one product's attributes change…
    await caughtUp();
    const tampered = '3';
    const removed = '4';
    await db.query(`UPDATE proj_menu.products SET attributes = '{"title":"tampered"}' WHERE id = $1`, [tampered]);
    const altered = await run(['verify']);
    expect({ code: altered.code }).toEqual({ code: 1 });
    expect(altered.stdout).toMatch(new RegExp(`^product ${tampered}: attributes$`, 'm'));
    expect(altered.stdout).toMatch(/^menu: 1 difference\(s\)$/m);
    expect(altered.stdout).toMatch(/^orders: identical to a rebuild from the log$/m);

    // …then a product and a store disappear.
    await db.query('DELETE FROM proj_menu.products WHERE id = $1', [removed]);
    const storeRemoved = '2';
    await db.query('DELETE FROM proj_orders.stores WHERE id = $1', [storeRemoved]);
    const deleted = await run(['verify']);
    expect({ code: deleted.code }).toEqual({ code: 1 });
    expect(deleted.stdout).toMatch(new RegExp(`^product ${tampered}: attributes$`, 'm'));
    expect(deleted.stdout).toMatch(new RegExp(`^product ${removed}: \\S`, 'm'));
    expect(deleted.stdout).toMatch(new RegExp(`^store ${storeRemoved}: \\S`, 'm'));
    expect(deleted.stdout).toMatch(/^menu: 2 difference\(s\)$/m);
    expect(deleted.stdout).toMatch(/^orders: 1 difference\(s\)$/m);
    // verify only reports: the live rows stay as they were left.
    expect((await db.query('SELECT attributes FROM proj_menu.products WHERE id = $1', [tampered])).rows).toEqual([
      { attributes: { title: 'tampered' } },
    ]);
    expect((await db.query('SELECT 1 FROM proj_menu.products WHERE id = $1', [removed])).rows).toEqual([]);

    const replayed = await run(['replay']);
    expect({ code: replayed.code, run: replayed.code === 0 ? '' : describeRun(replayed) }).toEqual({
      code: 0,
      run: '',
    });
    const again = await run(['verify']);
    expect({ code: again.code, run: again.code === 0 ? '' : describeRun(again) }).toEqual({ code: 0, run: '' });
    expect(again.stdout).toMatch(/^menu: identical to a rebuild from the log$/m);
    const repaired = await api(app.url, `/api/v1/products/${tampered}`);
    expect(repaired.status).toBe(200);
    expect(repaired.json.attributes.title).toMatch(new RegExp(`^Product ${tampered} r\\d+$`));
    expect((await api(app.url, `/api/v1/products/${removed}`)).status).toBe(200);
  }, 90000);

  it('lets one rebuild of a projection run at a time: a second replay, or a verify, meanwhile exits 1 saying so', async () => {
    // A reader holding the live tables keeps the first replay from finishing (its last step, dropping
    // the old schema, waits for the reader), so the other two surely run while it holds its lock.
    const reader = new pg.Client({ connectionString: app.database.url });
    await reader.connect();
    await reader.query('BEGIN');
    await reader.query('SELECT count(*) FROM proj_menu.products');
    const first = cli(['replay', '--projection', 'menu']);
    let others: CliResult[];
    try {
      // The first holds the rebuild lock once its shadow schema exists.
      await eventually(
        async () => {
          const { rows } = await db.query(`SELECT to_regnamespace('proj_menu__shadow') IS NOT NULL AS present`);
          expect({ running: first.running, shadow: rows[0].present }).toEqual({ running: true, shadow: true });
        },
        20000,
        5,
      );
      others = await Promise.all([run(['replay', '--projection', 'menu']), run(['verify', '--projection', 'menu'])]);
      expect(first.running).toBe(true);
    } finally {
      await reader.query('ROLLBACK').catch(() => undefined);
      await reader.end();
    }
    const firstResult = await first.wait(60000);
    verbose(
      `first replay ${firstResult.startedAt}..${firstResult.endedAt}, others ended ${others.map((o) => o.endedAt).join(', ')}`,
    );
    expect({ code: firstResult.code, run: firstResult.code === 0 ? '' : describeRun(firstResult) }).toEqual({
      code: 0,
      run: '',
    });
    for (const other of others) {
      expect({
        code: other.code,
        refused: /another replay or verify of menu is running/.test(other.stdout + other.stderr),
        run: describeRun(other),
      }).toEqual({ code: 1, refused: true, run: expect.any(String) });
    }
    // The refused ones left nothing behind: no scratch schema, and the first one's result stands.
    expect(await shadowSchemas(db)).toEqual([]);
    await caughtUp();
    await expectModelEqualsFold(db);
  }, 90000);

  it('a replay cut off from the database just after its swap committed leaves nothing that a rerun trips over', async () => {
    await caughtUp();
    // A reader (a report, a pg_dump) holding the live tables makes the replay's final DROP of the old schema wait…
    const reader = new pg.Client({ connectionString: app.database.url });
    await reader.connect();
    await reader.query('BEGIN');
    await reader.query('SELECT count(*) FROM proj_menu.products');
    const replay = cli(['replay', '--projection', 'menu']);
    let dropping: number | undefined;
    try {
      dropping = await eventually(
        async () => {
          if (!replay.running) return undefined;
          const { rows } = await db.query(
            `SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'DROP SCHEMA proj_menu__old%'`,
          );
          expect(rows).toHaveLength(1);
          return rows[0].pid as number;
        },
        30000,
        10,
      );
      // …and there its connection is lost (a failover, a network cut, an operator's pg_terminate_backend).
      if (dropping !== undefined) await db.query('SELECT pg_terminate_backend($1)', [dropping]);
    } finally {
      await reader.query('ROLLBACK').catch(() => undefined);
      await reader.end();
    }
    const cut = await replay.wait(20000);
    expect({ waitedOnDrop: dropping !== undefined, run: dropping !== undefined ? '' : describeRun(cut) }).toEqual({
      waitedOnDrop: true,
      run: '',
    });
    verbose(
      `replay cut off during its cleanup: ${describeRun(cut).split('\n')[0]}; schemas left: ${(await shadowSchemas(db)).join(', ')}`,
    );

    // The swap had committed: the live model is the rebuilt one, and the daemon projects on from it.
    await postAll(
      Array.from({ length: 10 }, () => liveEvent()),
      202,
      2,
    );
    await caughtUp();
    await expectModelEqualsFold(db);

    // docs/reference.md §8: interrupted → a rerun starts cleanly.
    try {
      const rerun = await run(['replay']);
      expect({ code: rerun.code, run: rerun.code === 0 ? '' : describeRun(rerun) }).toEqual({ code: 0, run: '' });
      expect(await shadowSchemas(db)).toEqual([]);
      await caughtUp();
      await expectModelEqualsFold(db);
    } finally {
      // Whatever happened, leave no leftover for a later test.
      for (const schema of await shadowSchemas(db)) await db.query(`DROP SCHEMA ${schema} CASCADE`);
    }
  }, 60000);
  it('checkpoint saves each projection at its position; replay and verify --from-checkpoint start there and apply only the log after it', async () => {
    await caughtUp();
    const none = await run(['replay', '--projection', 'menu', '--from-checkpoint']);
    expect({ code: none.code, stderr: none.stderr }).toEqual({
      code: 1,
      stderr: expect.stringContaining('menu has no checkpoint: run menu-sync checkpoint first'),
    });

    const taken = await run(['checkpoint']);
    expect({ code: taken.code, run: taken.code === 0 ? '' : describeRun(taken) }).toEqual({ code: 0, run: '' });
    const { rows: saved } = await db.query(
      `SELECT projection, position::text AS position, transaction_id::text AS xid, rows::int AS rows FROM projection_checkpoints ORDER BY projection`,
    );
    const { rows: live } = await db.query(
      `SELECT 'menu' AS projection, position::text AS position FROM proj_menu.checkpoint
       UNION ALL SELECT 'orders', position::text FROM proj_orders.checkpoint ORDER BY 1`,
    );
    expect(saved.map((row) => [row.projection, row.position])).toEqual(
      live.map((row) => [row.projection, row.position]),
    );
    for (const row of saved)
      expect(taken.stdout).toContain(`${row.projection}: checkpoint at position ${row.position}, ${row.rows} rows`);

    await postAll(
      Array.from({ length: 12 }, () => liveEvent()),
      202,
      2,
    );
    await caughtUp();
    const menu = saved.find((row) => row.projection === 'menu')!;
    const { rows: after } = await db.query(
      `SELECT count(*)::int AS n FROM event_log WHERE (transaction_id, position) > ($1::xid8, $2::bigint)`,
      [menu.xid, menu.position],
    );
    expect(after[0].n).toBe(12);
    const replay = await run(['replay', '--from-checkpoint']);
    expect({ code: replay.code, run: replay.code === 0 ? '' : describeRun(replay) }).toEqual({ code: 0, run: '' });
    expect(replay.stdout).toMatch(
      new RegExp(`^menu: rebuilt from the checkpoint at position ${menu.position} and 12 log entries in `, 'm'),
    );
    await caughtUp();
    await expectModelEqualsFold(db);

    const verify = await run(['verify', '--from-checkpoint']);
    expect(verify.code).toBe(0);
    expect(verify.stdout).toMatch(
      new RegExp(
        `^menu: identical to a rebuild from the checkpoint at position ${menu.position} and the log after it$`,
        'm',
      ),
    );
    const { rows: audited } = await db.query(
      `SELECT target, detail->>'position' AS position FROM audit_log WHERE action = 'projection.checkpointed' ORDER BY target`,
    );
    expect(audited).toEqual(saved.map((row) => ({ target: row.projection, position: row.position })));
    expect(await shadowSchemas(db)).toEqual([]);
  }, 120000);
});

import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { ChangeStream, changesAfter } from './support/changes.js';
import { runCli } from './support/cli.js';
import { DaemonProcess } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import { api, deliver, RunningDaemon, scrape, startDaemon } from './support/http.js';
import {
  at,
  collection,
  destroyedEvent,
  Json,
  menuEvent,
  product,
  Resource,
  trait,
  traitOption,
} from './support/menu-events.js';

/**
 * docs/reference.md §11, the feed: bootstrap from /menu and follow the SSE feed from its changes_cursor,
 * across a daemon restart (Last-Event-ID), ends equal to the final /menu; long-poll answers when a
 * change arrives; a replay's repairs flow out; a cursor behind the compaction horizon is 410; bad
 * input is a 400 naming the field. One daemon (a child process) on a fresh database, restarted once.
 */

const OWNER = `feed-owner-${randomUUID().slice(0, 8)}`;
let minute = 0;
const meta = () => ({ at: at(minute++), ownerId: OWNER });
const created = (resource: Resource) => menuEvent('created', resource, meta());
const updated = (resource: Resource) => menuEvent('updated', resource, meta());

let daemon: RunningDaemon;

async function send(...events: Json[]): Promise<void> {
  for (const event of events) {
    const answer = await deliver(daemon.url, event);
    if (answer.status !== 202) throw new Error(`delivery: ${answer.status} ${answer.text}`);
  }
}

async function caughtUp(): Promise<void> {
  await eventually(
    async () => {
      const { data } = (await api(daemon.url, '/api/v1/projections')).json;
      expect(data.every((projection: Json) => projection.lag === 0)).toBe(true);
    },
    30000,
    50,
  );
}

/** A consumer's catalogue: the newest state of each resource, kept from the bootstrap and the changes. */
class Catalogue {
  readonly resources = new Map<string, Json>();

  bootstrap(menu: Json): void {
    for (const item of menu.collections) this.put(item);
    for (const { traits, ...item } of menu.products) {
      this.put(item);
      for (const { trait_options: options, ...traitItem } of traits) {
        this.put(traitItem);
        for (const option of options) this.put(option);
      }
    }
  }

  apply(change: Json): void {
    expect(change.resource).toMatchObject({ type: change.type, id: change.id });
    this.put(change.resource);
  }

  /** The catalogue rendered as GET /api/v1/menu shows an owner's menu. */
  menu(owner: string): Json {
    const live = (type: string) =>
      [...this.resources.values()]
        .filter((item) => item.type === type && !item.deleted && item.owner_id === owner)
        .sort((a, b) => Number(a.id) - Number(b.id));
    const linked = (item: Json, relationship: string, type: string) =>
      (item.relationships[relationship]?.data ?? [])
        .map((link: Json) => this.resources.get(`${type}/${link.id}`))
        .filter((found: Json) => found !== undefined && !found.deleted);
    return {
      collections: live('collection'),
      products: live('product').map((item) => ({
        ...item,
        traits: linked(item, 'traits', 'trait').map((t: Json) => ({
          ...t,
          trait_options: linked(t, 'trait_options', 'trait_option'),
        })),
      })),
    };
  }

  private put(item: Json): void {
    this.resources.set(`${item.type}/${item.id}`, item);
  }
}

const menuContent = ({ collections, products }: Json) => ({ collections, products });

beforeAll(async () => {
  daemon = await startDaemon({ LOG_LEVEL: 'info' });
}, 120_000);

afterAll(async () => {
  // The restarted process is not the one startDaemon's close() knows.
  if (daemon && !daemon.process.hasExited) {
    daemon.process.kill('SIGTERM');
    await daemon.process.waitForExit(15000);
  }
  await daemon?.close();
});

describe('bootstrap from /menu, then follow the SSE feed', () => {
  it('across a daemon restart ends equal to the final menu, each change once and in order', async () => {
    await send(
      created(traitOption('501', { traitId: '50' })),
      created(traitOption('502', { traitId: '50' })),
      created(trait('50', { optionIds: ['501', '502'] })),
      created(product('1', { traitIds: ['50'] })),
      created(product('2')),
      created(product('3')),
      created(collection('9', { productIds: ['1', '2'] })),
    );
    await caughtUp();
    const menu = await api(daemon.url, `/api/v1/menu?owner_id=${OWNER}`);
    expect(menu.status).toBe(200);
    expect(menu.json.changes_cursor).toEqual(expect.any(String));
    expect(menu.headers.get('x-changes-cursor')).toBe(menu.json.changes_cursor);
    const catalogue = new Catalogue();
    catalogue.bootstrap(menu.json);

    // Changes made after the snapshot: every one must arrive, none from before it.
    let stream = new ChangeStream(daemon.url, { after: menu.json.changes_cursor, query: `&owner_id=${OWNER}` });
    await send(
      updated(product('1', { title: 'Renamed', traitIds: ['50'] })),
      destroyedEvent('product', '2', meta()),
      created(product('4', { traitIds: ['50'] })),
      updated(traitOption('502', { traitId: '50', title: 'Extra' })),
    );
    await eventually(async () => expect(stream.changes).toHaveLength(4), 30000, 50);
    const seen = [...stream.changes];
    const resumeFrom = stream.lastId!;
    await stream.close();

    const env = daemon.process.env;
    const cwd = daemon.process.cwd;
    daemon.process.kill('SIGTERM');
    expect((await daemon.process.waitForExit(15000)).code).toBe(0);
    const restarted = await DaemonProcess.start({ env, cwd, port: daemon.process.port });
    daemon.process = restarted;

    // Last-Event-ID takes precedence over an after that would replay everything.
    stream = new ChangeStream(daemon.url, {
      after: menu.json.changes_cursor,
      lastEventId: resumeFrom,
      query: `&owner_id=${OWNER}`,
    });
    await send(
      destroyedEvent('trait_option', '501', meta()),
      created(product('2', { title: 'Back again' })),
      updated(collection('9', { productIds: ['1', '2', '4'] })),
    );
    await eventually(async () => expect(stream.changes).toHaveLength(3), 30000, 50);
    seen.push(...stream.changes);
    await stream.close();

    // Order is guaranteed per resource (product/2: deleted, then back), not across resources of one page.
    expect(seen.map((change) => `${change.op} ${change.type}/${change.id}`).sort()).toEqual([
      'delete product/2',
      'delete trait_option/501',
      'upsert collection/9',
      'upsert product/1',
      'upsert product/2',
      'upsert product/4',
      'upsert trait_option/502',
    ]);
    expect(seen.filter((change) => change.id === '2' && change.type === 'product').map((change) => change.op)).toEqual([
      'delete',
      'upsert',
    ]);
    expect(seen.map((change) => change.seq)).toEqual([...seen.map((change) => change.seq)].sort((a, b) => a - b));
    expect(new Set(seen.map((change) => change.change_id)).size).toBe(seen.length);
    for (const change of seen) catalogue.apply(change);
    const final = await api(daemon.url, `/api/v1/menu?owner_id=${OWNER}`);
    expect(catalogue.menu(OWNER)).toEqual(menuContent(final.json));
    // What a change carries is exactly what the item endpoint shows.
    const item = await api(daemon.url, '/api/v1/products/1');
    expect(seen.find((change) => change.id === '1' && change.type === 'product').resource).toEqual(item.json);
    expect(await scrape(daemon.url, 'menu_sync_change_log_head')).toBeGreaterThanOrEqual(seen.length);
  }, 180_000);

  it('a list answers a changes_cursor in its body and header, none with as_of', async () => {
    const list = await api(daemon.url, `/api/v1/products?owner_id=${OWNER}`);
    expect(list.json.changes_cursor).toEqual(expect.any(String));
    expect(list.headers.get('x-changes-cursor')).toBe(list.json.changes_cursor);
    expect((await changesAfter(daemon.url, list.json.changes_cursor)).changes).toEqual([]);
    const asOf = await api(daemon.url, `/api/v1/products?owner_id=${OWNER}&as_of=${encodeURIComponent(at(1000))}`);
    expect(asOf.json.changes_cursor).toBeNull();
    expect(asOf.headers.get('x-changes-cursor')).toBeNull();
  });
});

describe('long-poll', () => {
  it('answers as soon as a change arrives, and with none when the wait ends', async () => {
    const { cursor } = await changesAfter(daemon.url);
    const started = Date.now();
    const waiting = api(daemon.url, `/api/v1/changes?after=${cursor}&wait=30`);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await send(created(product('60', { title: 'Long-polled' })));
    const answer = await waiting;
    expect(answer.status).toBe(200);
    expect(answer.json.data.map((change: Json) => `${change.type}/${change.id}`)).toEqual(['product/60']);
    expect(Date.now() - started).toBeLessThan(20_000);

    const quiet = Date.now();
    const empty = await api(daemon.url, `/api/v1/changes?after=${answer.json.next_cursor}&wait=1`);
    expect(empty.json).toEqual({ data: [], next_cursor: answer.json.next_cursor });
    expect(Date.now() - quiet).toBeGreaterThanOrEqual(900);
  }, 60_000);
});

describe('a replay that repairs drift', () => {
  it('publishes a change for exactly the repaired resource', async () => {
    const { cursor } = await changesAfter(daemon.url);
    const client = new pg.Client({ connectionString: daemon.database.url });
    await client.connect();
    try {
      await client.query(`UPDATE proj_menu.products SET attributes = '{"title":"drifted"}' WHERE id = '3'`);
    } finally {
      await client.end();
    }
    const env = { ...daemon.process.env };
    delete env.PATH;
    delete env.HOME;
    const replay = await runCli(['replay', '--projection', 'menu'], env, daemon.process.cwd, 120_000);
    expect(replay.code).toBe(0);
    const { changes } = await changesAfter(daemon.url, cursor);
    expect(changes.map((change: Json) => `${change.op} ${change.type}/${change.id}`)).toEqual(['upsert product/3']);
    expect(changes[0].resource).toEqual((await api(daemon.url, '/api/v1/products/3')).json);
  }, 180_000);
});

describe('bad input', () => {
  it.each([
    ['after=not*a*cursor', 'after'],
    [`after=${Buffer.from('12.x').toString('base64url')}`, 'after'],
    ['wait=61', 'wait'],
    ['wait=-1', 'wait'],
    ['wait=soon', 'wait'],
    ['type=products,widgets', 'type'],
    ['limit=0', 'limit'],
  ])('GET /api/v1/changes?%s is a 400 naming %s', async (query, field) => {
    const answer = await api(daemon.url, `/api/v1/changes?${query}`);
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(answer.json).toMatchObject({ status: 400, field });
  });

  it('a malformed Last-Event-ID on the stream is a 400 naming it', async () => {
    const answer = await api(daemon.url, '/api/v1/changes', undefined, {
      headers: { accept: 'text/event-stream', 'last-event-id': 'garbage!' },
    });
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({ field: 'Last-Event-ID' });
  });
});

describe('retention', () => {
  let compacting: RunningDaemon;

  beforeAll(async () => {
    compacting = await startDaemon({ CHANGES_RETENTION: '1s' });
  }, 120_000);

  afterAll(async () => {
    await compacting?.close();
  });

  it('a cursor behind the compaction horizon answers 410 (JSON and SSE); the compacted log from its start is the newest of each resource', async () => {
    const owner = 'compacted';
    const deliverTo = async (event: Json) => expect((await deliver(compacting.url, event)).status).toBe(202);
    await deliverTo(menuEvent('created', product('1'), { at: at(1), ownerId: owner }));
    const first = await eventually(
      async () => {
        const page = await changesAfter(compacting.url);
        expect(page.changes).toHaveLength(1);
        return page;
      },
      30000,
      50,
    );
    await deliverTo(menuEvent('updated', product('1', { title: 'Second' }), { at: at(2), ownerId: owner }));
    // Projected apart from the third (one page would publish only the newest): a change after the
    // first cursor is then compacted away, which is what makes that cursor expire.
    await eventually(
      async () => expect((await api(compacting.url, `/api/v1/products/1`)).json.attributes.title).toBe('Second'),
      30000,
      50,
    );
    await deliverTo(menuEvent('updated', product('1', { title: 'Third' }), { at: at(3), ownerId: owner }));
    const gone = await eventually(
      async () => {
        const answer = await api(compacting.url, `/api/v1/changes?after=${first.cursor}`);
        expect(answer.status).toBe(410);
        return answer;
      },
      30000,
      200,
    );
    expect(gone.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(gone.json).toMatchObject({ status: 410, field: 'after', detail: expect.stringMatching(/bootstrap again/) });
    const stream = await api(compacting.url, '/api/v1/changes', undefined, {
      headers: { accept: 'text/event-stream', 'last-event-id': first.cursor },
    });
    expect(stream.status).toBe(410);
    expect(stream.json).toMatchObject({ field: 'Last-Event-ID' });
    const { changes } = await changesAfter(compacting.url);
    expect(changes.map((change: Json) => change.resource.attributes.title)).toEqual(['Third']);
  }, 120_000);
});

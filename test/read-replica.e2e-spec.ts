import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { encodeChangeCursor } from '../src/changes/change-cursor.js';
import { ChangeStream } from './support/changes.js';
import { eventually } from './support/eventually.js';
import { Answer, api, deliver, expectFieldProblem, metricValue, RunningDaemon, startDaemon } from './support/http.js';
import { at, collection, Json, menuEvent, product } from './support/menu-events.js';
import { onReplica, replicaCluster, replicaUrlOf } from './support/replica.js';

/**
 * Issue 33, reads from a replica: a daemon whose DATABASE_READ_URL is the real hot standby
 * test/services.sh makes (a pg_basebackup of the primary, streaming). A write (a delivery,
 * projected) then a read with min_cursor sees it, whichever side serves it; with replay paused the
 * replica cannot hold it, and the primary answers after the wait; with the replica stopped, reads
 * fall back to the primary and answer the same; the lag is exported. Without DATABASE_READ_URL,
 * answers are as before (no X-Served-By, no replica metrics).
 */

const OWNER = `replica-owner-${randomUUID().slice(0, 8)}`;
let minute = 0;
const created = (resource: Json) => menuEvent('created', resource, { at: at(minute++), ownerId: OWNER });

let daemon: RunningDaemon;
let plain: RunningDaemon;

async function send(...events: Json[]): Promise<void> {
  for (const event of events) {
    const answer = await deliver(daemon.url, event);
    if (answer.status !== 202) throw new Error(`delivery: ${answer.status} ${answer.text}`);
  }
}

/** Waits for the projector (whose status the primary answers) to reach the log's head. */
async function projected(): Promise<void> {
  await eventually(
    async () => {
      const { data } = (await api(daemon.url, '/api/v1/projections')).json;
      expect(data.every((projection: Json) => projection.lag === 0)).toBe(true);
    },
    30_000,
    50,
  );
}

/** The cursor of the newest change, read on the primary: what a client that saw the write holds. */
async function primaryCursor(): Promise<string> {
  const client = new pg.Client({ connectionString: daemon.database.url });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT transaction_id::text AS "transactionId", seq::text AS seq FROM change_log
        ORDER BY transaction_id DESC, seq DESC LIMIT 1`,
    );
    return encodeChangeCursor(rows[0]);
  } finally {
    await client.end();
  }
}

const collectionIds = (answer: Answer) => answer.json.data.map((item: Json) => item.id);
const servedBy = (answer: Answer) => answer.headers.get('x-served-by');

async function metrics(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

beforeAll(async () => {
  [daemon, plain] = await Promise.all([
    startDaemon((database) => ({ DATABASE_READ_URL: replicaUrlOf(database) })),
    startDaemon(),
  ]);
  await send(created(collection('1', { title: 'Before' })));
  await projected();
  // The replica has the database and has replayed a WAL position the router noted: reads go there.
  await eventually(
    async () => expect(servedBy(await api(daemon.url, `/api/v1/collections?owner_id=${OWNER}`))).toBe('replica'),
    60_000,
    100,
  );
}, 180_000);

afterAll(async () => {
  await onReplica(daemon.database, 'SELECT pg_wal_replay_resume()').catch(() => undefined);
  await Promise.all([daemon?.close(), plain?.close()]);
});

describe('reads from the replica', () => {
  it('serve every routed read: pages, by id, as_of, /menu and the change feed', async () => {
    const paths = [
      `/api/v1/collections?owner_id=${OWNER}`,
      '/api/v1/collections/1',
      `/api/v1/collections?owner_id=${OWNER}&as_of=2030-01-01T00:00:00Z`,
      `/api/v1/menu?owner_id=${OWNER}`,
      `/api/v1/menu?owner_id=${OWNER}&as_of=2030-01-01T00:00:00Z`,
      '/api/v1/changes?limit=1000',
    ];
    for (const path of paths) {
      const answer = await api(daemon.url, path);
      expect([path, answer.status, servedBy(answer)]).toEqual([path, 200, 'replica']);
    }
    const menu = (await api(daemon.url, `/api/v1/menu?owner_id=${OWNER}`)).json;
    expect(menu.collections.map((item: Json) => [item.id, item.attributes.title])).toEqual([['1', 'Before']]);
    // Reads the replica does not serve stay on the primary, and say nothing.
    expect(servedBy(await api(daemon.url, '/api/v1/projections'))).toBeNull();
  }, 120_000);

  it('a write then a read with min_cursor sees the write, whichever side serves it', async () => {
    await send(created(collection('2', { title: 'Written' })), created(product('20')));
    await projected();
    const cursor = await primaryCursor();
    for (const [path, headers] of [
      [`/api/v1/collections?owner_id=${OWNER}&min_cursor=${cursor}`, {}],
      [`/api/v1/collections?owner_id=${OWNER}`, { 'x-min-changes-cursor': cursor }],
    ] as const) {
      const answer = await api(daemon.url, path, undefined, { headers });
      expect(answer.status).toBe(200);
      expect(['replica', 'primary']).toContain(servedBy(answer));
      expect(collectionIds(answer)).toEqual(['1', '2']);
    }
    const item = await api(daemon.url, `/api/v1/products/20?min_cursor=${cursor}`);
    expect([item.status, item.json.id, item.json.owner_id]).toEqual([200, '20', OWNER]);
    const menu = await api(daemon.url, `/api/v1/menu?owner_id=${OWNER}&min_cursor=${cursor}`);
    expect(menu.json.collections.map((c: Json) => c.attributes.title)).toEqual(['Before', 'Written']);
    expect(menu.json.products.map((p: Json) => p.id)).toEqual(['20']);
    expect(menu.headers.get('x-changes-cursor')).toBe(cursor);
  }, 120_000);

  it('with replay paused, a read with min_cursor waits, then the primary answers it; resumed, the replica does', async () => {
    await onReplica(daemon.database, 'SELECT pg_wal_replay_pause()');
    try {
      await send(created(collection('3', { title: 'Paused' })));
      await projected();
      const cursor = await primaryCursor();
      // The replica cannot hold the write: without min_cursor it answers as it stands.
      const stale = await api(daemon.url, `/api/v1/collections?owner_id=${OWNER}`);
      expect(collectionIds(stale)).toEqual(servedBy(stale) === 'replica' ? ['1', '2'] : ['1', '2', '3']);
      const waited = await api(daemon.url, `/api/v1/collections?owner_id=${OWNER}&min_cursor=${cursor}`);
      expect([servedBy(waited), collectionIds(waited)]).toEqual(['primary', ['1', '2', '3']]);
      const feed = await api(daemon.url, `/api/v1/changes?limit=1000&min_cursor=${cursor}`);
      expect(servedBy(feed)).toBe('primary');
      expect(feed.json.data.at(-1)).toMatchObject({ type: 'collection', id: '3' });
    } finally {
      await onReplica(daemon.database, 'SELECT pg_wal_replay_resume()');
    }
    const cursor = await primaryCursor();
    await eventually(async () => {
      const answer = await api(daemon.url, `/api/v1/collections?owner_id=${OWNER}&min_cursor=${cursor}`);
      expect([servedBy(answer), collectionIds(answer)]).toEqual(['replica', ['1', '2', '3']]);
    }, 30_000);
  }, 120_000);

  it('while the replica lags more than READ_REPLICA_MAX_LAG (5 s; replay paused), reads go to the primary', async () => {
    await onReplica(daemon.database, 'SELECT pg_wal_replay_pause()');
    try {
      await send(created(collection('4', { title: 'Lagging' })));
      await eventually(
        async () => {
          const answer = await api(daemon.url, `/api/v1/collections?owner_id=${OWNER}`);
          expect([servedBy(answer), collectionIds(answer)]).toEqual(['primary', ['1', '2', '3', '4']]);
        },
        30_000,
        100,
      );
      expect(metricValue(await metrics(daemon.url), 'menu_sync_read_replica_lag_seconds')).toBeGreaterThan(5);
    } finally {
      await onReplica(daemon.database, 'SELECT pg_wal_replay_resume()');
    }
    await eventually(
      async () => expect(servedBy(await api(daemon.url, `/api/v1/collections?owner_id=${OWNER}`))).toBe('replica'),
      30_000,
      100,
    );
  }, 120_000);

  it('a long-poll and an SSE stream on the replica are woken by a change', async () => {
    // The head as the replica serves it once it holds the change of the test before: a cursor
    // taken earlier would lie before that change, which the long-poll would then rightly answer.
    await eventually(
      async () => {
        const answer = await api(daemon.url, `/api/v1/collections?owner_id=${OWNER}`);
        expect([servedBy(answer), collectionIds(answer)]).toEqual(['replica', ['1', '2', '3', '4']]);
      },
      30_000,
      100,
    );
    const head = (await api(daemon.url, '/api/v1/changes?limit=1000')).json.next_cursor;
    const poll = api(daemon.url, `/api/v1/changes?after=${head}&wait=30`);
    const stream = new ChangeStream(daemon.url, { after: head });
    try {
      await send(created(collection('5', { title: 'Woken' })));
      const answer = await poll;
      expect(servedBy(answer)).toBe('replica');
      expect(answer.json.data.map((change: Json) => [change.type, change.id])).toEqual([['collection', '5']]);
      await eventually(async () => expect(stream.changes.map((change) => change.id)).toEqual(['5']), 30_000);
    } finally {
      await stream.close();
    }
  }, 120_000);

  it('export the lag and whether the replica answers', async () => {
    const exposition = await metrics(daemon.url);
    expect(exposition).toMatch(/^menu_sync_read_replica_lag_seconds \d+(\.\d+)?$/m);
    expect(metricValue(exposition, 'menu_sync_read_replica_lag_seconds')).toBeLessThan(30);
    expect(metricValue(exposition, 'menu_sync_read_replica_up')).toBe(1);
  }, 120_000);
});

describe('with the replica stopped', () => {
  it('reads fall back to the primary and answer the same; the replica serves again once started', async () => {
    // The menu as the replica serves it once it holds every change so far (the feed answered
    // them from the primary: it follows the shared read, which reads there).
    await eventually(
      async () => {
        const answer = await api(daemon.url, `/api/v1/collections?owner_id=${OWNER}`);
        expect([servedBy(answer), collectionIds(answer)]).toEqual(['replica', ['1', '2', '3', '4', '5']]);
      },
      30_000,
      100,
    );
    const before = await api(daemon.url, `/api/v1/menu?owner_id=${OWNER}`);
    await replicaCluster('stop');
    try {
      await send(created(collection('6', { title: 'While down' })));
      await projected();
      const cursor = await primaryCursor();
      const page = await api(daemon.url, `/api/v1/collections?owner_id=${OWNER}`);
      expect([page.status, servedBy(page), collectionIds(page)]).toEqual([
        200,
        'primary',
        ['1', '2', '3', '4', '5', '6'],
      ]);
      const item = await api(daemon.url, '/api/v1/collections/6');
      expect([item.status, servedBy(item), item.json.attributes.title]).toEqual([200, 'primary', 'While down']);
      const menu = await api(daemon.url, `/api/v1/menu?owner_id=${OWNER}&min_cursor=${cursor}`);
      expect([menu.status, servedBy(menu)]).toEqual([200, 'primary']);
      expect(menu.json.collections).toEqual([...before.json.collections, item.json]);
      const asOf = await api(daemon.url, `/api/v1/collections?owner_id=${OWNER}&as_of=2030-01-01T00:00:00Z`);
      expect([servedBy(asOf), collectionIds(asOf)]).toEqual(['primary', ['1', '2', '3', '4', '5', '6']]);
      const feed = await api(daemon.url, '/api/v1/changes?limit=1000');
      expect([servedBy(feed), feed.json.data.at(-1).id]).toEqual(['primary', '6']);
      await eventually(async () => expect(metricValue(await metrics(daemon.url), 'menu_sync_read_replica_up')).toBe(0));
    } finally {
      await replicaCluster('start');
    }
    const cursor = await primaryCursor();
    await eventually(
      async () => {
        const answer = await api(daemon.url, `/api/v1/collections?owner_id=${OWNER}&min_cursor=${cursor}`);
        expect([servedBy(answer), collectionIds(answer)]).toEqual(['replica', ['1', '2', '3', '4', '5', '6']]);
      },
      60_000,
      100,
    );
  }, 120_000);
});

describe('without DATABASE_READ_URL', () => {
  it('answers as before: no X-Served-By, no replica metrics; min_cursor is checked all the same', async () => {
    const answer = await api(
      plain.url,
      `/api/v1/collections?min_cursor=${encodeChangeCursor({ transactionId: '1', seq: '1' })}`,
    );
    expect([answer.status, servedBy(answer)]).toEqual([200, null]);
    expect(await metrics(plain.url)).not.toMatch(/menu_sync_read_replica/);
    expectFieldProblem(await api(plain.url, '/api/v1/collections?min_cursor=bm90LWEtY3Vyc29y'), 400, 'min_cursor');
    expectFieldProblem(
      await api(plain.url, '/api/v1/menu?owner_id=x', undefined, { headers: { 'x-min-changes-cursor': 'x' } }),
      400,
      'X-Min-Changes-Cursor',
    );
  });
});

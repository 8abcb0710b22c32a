import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { LOCK_SPACES } from '../src/database/advisory-locks.js';
import { SINK_BUCKETS, sinkLeaseKey } from '../src/sinks/dispatch/sink-shares.js';
import { DaemonProcess, sleep, daemonEnv } from './support/daemon-process.js';
import { createTestDatabase, TestDatabase } from './support/database.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, deliver, LOOPBACK_NETWORKS, WEBHOOK_KEY } from './support/http.js';
import { menuEvent, product } from './support/menu-events.js';
import { ensureNats, NATS_URL } from './support/nats.js';
import { SinkReceiver } from './support/sink-receiver.js';

/**
 * docs/reference.md §13, "no PostgreSQL lock is held per sink": 20,000 sinks (one per store, made
 * by SQL as a bulk import would, all NATS but one HTTP sink made by the API) take at most
 * SINK_BUCKETS advisory locks of the daemon's dispatcher, so the cluster's shared lock table stays
 * usable: another session takes 500 advisory locks and a table lock in one transaction, and a change
 * of one store reaches exactly that store's sinks (within a generous 60 s), with no sink worker
 * failing for want of a database connection meanwhile ("a change costs O(1) plus O(consumers whose
 * filters match it), whatever the number of sinks"). TEST_VERBOSE shows the timeline.
 */

const SINKS = 20_000;
const HTTP_STORE = 'store-12345';
const NATS_STORE = 'store-777';
const SUFFIX = randomBytes(4).toString('hex');
const STREAM = `MENU_SYNC_LOCKS_${SUFFIX}`;
const PREFIX = `locks${SUFFIX}`;

/** The advisory locks granted in the database, by space (classid of a two-key lock, 0 for one-key locks). */
async function advisoryLocks(client: pg.Client, database: string): Promise<Map<number, number>> {
  const { rows } = await client.query<{ space: number; n: number }>(
    `SELECT CASE WHEN l.objsubid = 2 THEN l.classid::int ELSE 0 END AS space, count(*)::int AS n
       FROM pg_locks l JOIN pg_database d ON d.oid = l.database
      WHERE l.locktype = 'advisory' AND l.granted AND d.datname = $1
      GROUP BY 1 ORDER BY 1`,
    [database],
  );
  return new Map(rows.map((row) => [row.space, row.n]));
}

/** Log lines (of the output kept, its last 256 KiB) of a connection not had from the pool in time, since `since`. */
function poolTimeouts(logs: string, since: number): number {
  return logs
    .split('\n')
    .filter((line) => line.includes('timeout exceeded when trying to connect'))
    .filter((line) => Date.parse(/"time":"([^"]+)"/.exec(line)?.[1] ?? '') >= since).length;
}

describe('20,000 sinks leave PostgreSQL’s lock table usable (built daemon, child process)', () => {
  let database: TestDatabase;
  let dir: string;
  let client: pg.Client;
  let other: pg.Client;
  let nc: NatsConnection;
  let receiver: SinkReceiver;

  beforeAll(async () => {
    nc = await ensureNats();
    database = await createTestDatabase();
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-lock-table-'));
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    other = new pg.Client({ connectionString: database.url });
    await other.connect();
    receiver = await new SinkReceiver().start();
  }, 120_000);

  afterAll(async () => {
    await DaemonProcess.killAll();
    await receiver?.close();
    await other?.end();
    await client?.end();
    if (nc) {
      await (await jetstreamManager(nc)).streams.delete(STREAM).catch(() => undefined);
      await nc.close();
    }
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the dispatcher holds one lock per bucket, another session still takes 500 advisory locks and a table lock, and a store’s change reaches its sinks', async () => {
    // Every sink but the HTTP one, `from now` (the cursor at the head: the log is empty, (0, 0)).
    const ids = Array.from({ length: SINKS - 1 }, () => randomUUID());
    const stores = Array.from({ length: SINKS }, (_, i) => `store-${i}`).filter((store) => store !== HTTP_STORE);
    await client.query(
      `INSERT INTO sinks (id, kind, stream, subject_prefix, owner_ids, batch_size)
         SELECT id, 'nats', $3, $4, ARRAY[store], 100 FROM unnest($1::uuid[], $2::text[]) AS t (id, store)`,
      [ids, stores, STREAM, PREFIX],
    );
    const daemon = await DaemonProcess.start({
      cwd: dir,
      readyTimeoutMs: 150_000,
      env: daemonEnv({
        DATABASE_URL: database.url,
        DATA_DIR: dir,
        WEBHOOK_KEYS: WEBHOOK_KEY,
        API_TOKENS: API_TOKEN,
        NATS_URL,
        SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
      }),
    });
    const startedAt = Date.now();
    // Pool timeouts per 5 s since the start, shown with TEST_VERBOSE.
    const timeline: string[] = [];
    const sampler = setInterval(
      () =>
        timeline.push(
          `${Math.round((Date.now() - startedAt) / 1000)}s:${poolTimeouts(daemon.logs, Date.now() - 5000)}`,
        ),
      5000,
    );
    const created = await api(daemon.url, '/api/v1/sinks', API_TOKEN, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'http', url: receiver.url, from: 'now', owner_ids: [HTTP_STORE] }),
    });
    expect(created.status).toBe(201);
    receiver.secrets = [created.json.data.secret];
    expect((await client.query(`SELECT count(*)::int AS n FROM sinks`)).rows[0].n).toBe(SINKS);

    const buckets = new Set([...ids, created.json.data.id as string].map(sinkLeaseKey)).size;
    expect(buckets).toBeLessThanOrEqual(SINK_BUCKETS);
    const held = await eventually(
      async () => {
        const locks = await advisoryLocks(client, database.name);
        expect(locks.get(LOCK_SPACES.sinkBucket)).toBe(buckets);
        return locks;
      },
      150_000,
      250,
    );
    const leasesAt = Date.now();
    const total = [...held.values()].reduce((sum, n) => sum + n, 0);
    expect({ total, bounded: total <= SINK_BUCKETS + 10 }).toEqual({ total, bounded: true });

    // Another session: 500 advisory locks and a table lock in one transaction, no "out of shared memory".
    await other.query('BEGIN');
    const taken = await other.query<{ ok: boolean }>(
      `SELECT bool_and(pg_try_advisory_xact_lock(4242, g)) AS ok FROM generate_series(1, 500) AS g`,
    );
    await other.query('LOCK TABLE event_log IN ACCESS SHARE MODE');
    const mine = await other.query<{ advisory: number; relation: number }>(
      `SELECT count(*) FILTER (WHERE locktype = 'advisory')::int AS advisory,
                count(*) FILTER (WHERE locktype = 'relation' AND relation = 'event_log'::regclass)::int AS relation
           FROM pg_locks WHERE pid = pg_backend_pid() AND granted`,
    );
    await other.query('COMMIT');
    expect({ ok: taken.rows[0].ok, ...mine.rows[0] }).toEqual({ ok: true, advisory: 500, relation: 1 });

    // A change of one store reaches that store's HTTP sink, and one NATS message for another store's.
    const answers = await Promise.all([
      deliver(
        daemon.url,
        menuEvent('created', product('912345', { title: 'The one product' }), {
          at: '2024-08-01T10:00:00.000Z',
          ownerId: HTTP_STORE,
          eventId: `locks-http-${SUFFIX}`,
        }),
      ),
      deliver(
        daemon.url,
        menuEvent('created', product('900777', { title: 'The other product' }), {
          at: '2024-08-01T10:00:01.000Z',
          ownerId: NATS_STORE,
          eventId: `locks-nats-${SUFFIX}`,
        }),
      ),
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([202, 202]);
    const posted = Date.now();
    for (const deadline = posted + 60_000; Date.now() < deadline; await sleep(100))
      if (receiver.acknowledgedChanges.length > 0) break;
    clearInterval(sampler);
    if (process.env.TEST_VERBOSE) {
      const at = (ms: number) => `${Math.round((ms - startedAt) / 1000)}s`;
      const delivered = receiver.received[0]?.at;
      process.stderr.write(
        `[lock-table] leases held at ${at(leasesAt)}, changes posted at ${at(posted)}, delivered at ${delivered === undefined ? 'never' : at(delivered)}; pool timeouts per 5 s: ${timeline.join(' ')}\n`,
      );
    }
    // The cursor moves once the target's answer is back, a moment after the receiver saw the batch.
    const view = async () => {
      const answer = await api(daemon.url, `/api/v1/sinks/${created.json.data.id}`, API_TOKEN);
      return answer.status === 200 ? answer.json.data : { status: answer.status, body: answer.text };
    };
    let shown = await view();
    for (const deadline = Date.now() + 5000; shown.lag !== 0 && Date.now() < deadline; await sleep(100))
      shown = await view();
    expect({
      delivered: receiver.acknowledgedChanges.length,
      sink: { lag: shown.lag, state: shown.state, last_error: shown.last_error, status: shown.status },
      poolTimeoutsInTheLast10s: poolTimeouts(daemon.logs, Date.now() - 10_000),
    }).toEqual({
      delivered: 1,
      sink: { lag: 0, state: 'active', last_error: null, status: undefined },
      poolTimeoutsInTheLast10s: 0,
    });
    expect(
      receiver.acknowledgedChanges.map((change) => ({
        type: change.type,
        id: change.id,
        owner_id: change.owner_id,
        op: change.op,
        title: change.resource.attributes.title,
        event_id: change.resource.version.event_id,
      })),
    ).toEqual([
      {
        type: 'product',
        id: '912345',
        owner_id: HTTP_STORE,
        op: 'upsert',
        title: 'The one product',
        event_id: `locks-http-${SUFFIX}`,
      },
    ]);
    const messages = await eventually(
      async () => {
        const read = await readStream(nc, STREAM);
        expect(read).toHaveLength(1);
        return read;
      },
      60_000,
      500,
    );
    expect(messages).toEqual([
      {
        subject: `${PREFIX}.${NATS_STORE}.product.900777`,
        owner_id: NATS_STORE,
        id: '900777',
        title: 'The other product',
      },
    ]);
    // Nothing more arrives: no other sink selected either change.
    await sleep(2000);
    expect(receiver.received).toHaveLength(1);
    expect(await readStream(nc, STREAM)).toHaveLength(1);
    expect((await advisoryLocks(client, database.name)).get(LOCK_SPACES.sinkBucket)).toBe(buckets);
    expect(daemon.logs).not.toMatch(/out of shared memory/i);
  }, 420_000);
});

async function readStream(
  nc: NatsConnection,
  stream: string,
): Promise<Array<{ subject: string; owner_id: string; id: string; title: string }>> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(stream).catch(() => null);
  if (info === null || info.state.messages === 0) return [];
  const out = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
    const message = await jsm.streams.getMessage(stream, { seq });
    if (message === null) continue;
    const change = message.json<any>();
    out.push({
      subject: message.subject,
      owner_id: change.owner_id,
      id: change.id,
      title: change.resource.attributes.title,
    });
  }
  return out;
}

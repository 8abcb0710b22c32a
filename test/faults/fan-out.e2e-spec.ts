import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Change, ChangeStream, changesAfter } from '../support/changes.js';
import { DaemonProcess, sleep } from '../support/daemon-process.js';
import { createTestDatabase, TestDatabase } from '../support/database.js';
import { api, API_TOKEN, LOOPBACK_NETWORKS, WEBHOOK_KEY } from '../support/http.js';
import { collection, destroyedEvent, Json, menuEvent, product } from '../support/menu-events.js';
import { SeededPrng, testSeed } from '../support/seeded-prng.js';
import { HubTarget, SinkHub } from '../support/sink-hub.js';
import { closeAgent, isAcked, Load, projections, statusCounts } from './load.js';

/**
 * Fan-out fault test (docs/design.md, "Fan-out"; docs/reference.md §11, §13): two `serve`
 * processes on one database, A (ingress, API, projector) and B (ingress, API, the only sink
 * dispatcher), and 230 HTTP sinks with random owner and type filters, made in three waves (before
 * the load, and during it, from `start` — behind the shared read — or `now`), some of whose targets
 * fail at random, all aimed at one receiver. A seeded random load of product and collection events
 * for 30 stores (versions out of order, destroys) goes to both; B is killed with SIGKILL mid-load and
 * started again. SSE clients of random owners follow both processes and reconnect with
 * Last-Event-ID. In the end every sink holds, per resource it selects, its changes in order (seq and
 * version never back), none outside its filter, none lost (a change left out only beside a newer one
 * of its resource in the same batch), its newest state that of the feed; and every SSE client holds
 * exactly the feed's changes of its owner. TEST_SEED replays a run.
 */

const SEED = testSeed();
const SETUP_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 480_000;
const STORES = Array.from({ length: 30 }, (_, i) => `fan-store-${i}`);
const PRODUCTS_PER_STORE = 6;
const COLLECTIONS_PER_STORE = 2;
const EVENTS = 700;
/** Sinks made before the load, at a quarter of it, and after the restart. */
const WAVES = [
  { sinks: 100, fromStart: 0.5 },
  { sinks: 80, fromStart: 0.75 },
  { sinks: 50, fromStart: 0.5 },
];
const BASE = Date.parse('2024-07-01T08:00:00.000Z');

interface PlannedSink {
  index: number;
  wave: number;
  target: HubTarget;
  ownerIds: string[] | null;
  types: string[] | null;
  from: 'start' | 'now';
  batchSize: number;
  failing: boolean;
  id?: string;
  /** The sink's cursor at its creation (where `now` starts). */
  cursor?: string;
}

const storeIndex = (owner: string) => Number(owner.slice('fan-store-'.length));
const productId = (store: number, k: number) => String(100_000 + store * 100 + k);
const collectionId = (store: number, k: number) => String(200_000 + store * 100 + k);

/**
 * The load: each event touches one resource of one store; its version (occurred_at, distinct per
 * event) is its place in the load give or take 30 s, so some arrive after a newer one (they change nothing).
 */
function plannedEvents(prng: SeededPrng): Json[] {
  return Array.from({ length: EVENTS }, (_, n) => {
    const owner = prng.pick(STORES);
    const store = storeIndex(owner);
    const meta = {
      at: new Date(BASE + n * 1001 + prng.int(-30, 30) * 1000).toISOString(),
      ownerId: owner,
      eventId: `fan-${SEED}-${n}`,
      seq: n + 1,
    };
    const isProduct = prng.chance(0.75);
    const id = isProduct
      ? productId(store, prng.int(0, PRODUCTS_PER_STORE - 1))
      : collectionId(store, prng.int(0, COLLECTIONS_PER_STORE - 1));
    const type = isProduct ? 'product' : 'collection';
    const roll = prng.next();
    if (roll < 0.15) return destroyedEvent(type, id, meta);
    const resource = isProduct
      ? product(id, { title: `Product ${id} #${n}`, cents: prng.int(100, 2000) })
      : collection(id, {
          title: `Collection ${id} #${n}`,
          productIds: prng.sample(
            Array.from({ length: PRODUCTS_PER_STORE }, (_, k) => productId(store, k)),
            prng.int(0, 3),
          ),
        });
    return menuEvent(roll < 0.55 ? 'created' : 'updated', resource, meta);
  });
}

function plannedSink(prng: SeededPrng, hub: SinkHub, index: number, wave: number): PlannedSink {
  const typeRoll = prng.next();
  const failing = prng.chance(0.1);
  const target = hub.target(String(index));
  if (failing) {
    // A target failing for a while (its first two answers and about a third of its next 30, never
    // more than two in a row after the first), asking for a retry within a second: the sink leaves
    // the shared read, retries on its own, joins again. Bounded in a row, so that the backoff
    // (doubling with each failure in a row) stays within seconds: a seed that drew eight in a row
    // backed a sink off for 111 s, past the test's deadline (the daemon right, the test wrong).
    const answers = new SeededPrng(SEED ^ (index * 7919));
    let inRow = 0;
    target.answer = (n) => {
      const fail = n < 2 || (n < 32 && inRow < 2 && answers.chance(0.3));
      inRow = fail ? inRow + 1 : 0;
      return fail ? { status: 503, headers: { 'retry-after': '1' } } : undefined;
    };
  }
  return {
    index,
    wave,
    target,
    ownerIds: prng.chance(0.08) ? null : prng.sample(STORES, prng.int(1, 3)),
    types:
      typeRoll < 0.2
        ? ['product']
        : typeRoll < 0.3
          ? ['collection']
          : typeRoll < 0.4
            ? ['product', 'collection']
            : null,
    from: prng.chance(WAVES[wave].fromStart) ? 'start' : 'now',
    batchSize: prng.pick([3, 10, 50, 100]),
    failing,
  };
}

const selects = (sink: Pick<PlannedSink, 'ownerIds' | 'types'>, change: Change) =>
  (sink.ownerIds === null || sink.ownerIds.includes(change.owner_id)) &&
  (sink.types === null || sink.types.includes(change.type));

const resourceKey = (change: Change) => `${change.type}/${change.id}`;

/**
 * A sink's record against the feed's changes it selects (`expected`, reader order), with retries
 * of an acknowledged batch (same webhook-id) and changes sent again after the kill (same change_id)
 * counted once, as a consumer deduplicating does: the problems found, empty when it holds them all.
 */
function sinkProblems(sink: PlannedSink, expected: Change[], readerIndex: Map<string, number>): string[] {
  const problems: string[] = [];
  const name = `sink ${sink.index} (${sink.id}, from ${sink.from}, wave ${sink.wave})`;
  const wanted = new Map(expected.map((change) => [change.change_id, change]));
  const batches = new Set<string>();
  /** Per change received: the most advanced reader index of the batches acknowledged before its batch. */
  const floorOf = new Map<string, number>();
  const last = new Map<string, Change>();
  let floor = -1;
  for (const request of sink.target.requests) {
    if (request.changes === null) problems.push(`${name}: a request did not verify`);
    if (request.changes === null || !isAcked(request.status) || batches.has(request.webhookId)) continue;
    batches.add(request.webhookId);
    let top = floor;
    let previous = -1;
    for (const change of request.changes) {
      const feed = wanted.get(change.change_id);
      if (feed === undefined) {
        problems.push(`${name}: ${resourceKey(change)} seq ${change.seq} is not among the changes it selects`);
        continue;
      }
      if (!isDeepStrictEqual(change, feed)) problems.push(`${name}: change ${change.seq} differs from the feed's`);
      const index = readerIndex.get(change.change_id)!;
      if (index <= previous) problems.push(`${name}: a batch out of reader order at seq ${change.seq}`);
      previous = index;
      top = Math.max(top, index);
      if (floorOf.has(change.change_id)) continue;
      floorOf.set(change.change_id, floor);
      const before = last.get(resourceKey(change));
      if (
        before !== undefined &&
        (change.seq <= before.seq ||
          Date.parse(change.resource.version.occurred_at) < Date.parse(before.resource.version.occurred_at))
      )
        problems.push(`${name}: ${resourceKey(change)} went back from seq ${before.seq} to ${change.seq}`);
      last.set(resourceKey(change), change);
    }
    floor = top;
  }
  // A change not received is allowed only beside a newer one of its resource in one batch: the first
  // newer one received came in a batch after every batch that ended before this change.
  const received = [...floorOf.keys()].map((id) => wanted.get(id)!);
  for (const change of expected) {
    if (floorOf.has(change.change_id)) continue;
    const newer = received.find((other) => resourceKey(other) === resourceKey(change) && other.seq > change.seq);
    if (newer === undefined) problems.push(`${name}: ${resourceKey(change)} seq ${change.seq} missing`);
    else if (floorOf.get(newer.change_id)! >= readerIndex.get(change.change_id)!)
      problems.push(`${name}: ${resourceKey(change)} seq ${change.seq} skipped (not in the batch of seq ${newer.seq})`);
  }
  const newest = new Map(expected.map((change) => [resourceKey(change), change.change_id]));
  const held = new Map([...last].map(([key, change]) => [key, change.change_id]));
  if (!isDeepStrictEqual(held, newest)) problems.push(`${name}: its newest state differs from the feed's`);
  if (sink.target.maxInFlight > 1) problems.push(`${name}: ${sink.target.maxInFlight} requests at once`);
  return problems;
}

/** An SSE client of one owner that reconnects (with Last-Event-ID) whenever its stream ends, to a live process. */
class Follower {
  readonly streams: ChangeStream[] = [];
  private stopped = false;
  readonly done: Promise<void>;

  constructor(
    readonly owner: string,
    readonly after: string | undefined,
    private readonly pick: () => string,
  ) {
    this.done = this.run();
  }

  get lastId(): string | undefined {
    for (let i = this.streams.length - 1; i >= 0; i--)
      if (this.streams[i].lastId !== undefined) return this.streams[i].lastId;
    return undefined;
  }

  get changes(): Change[] {
    return this.streams.flatMap((stream) => stream.changes);
  }

  /** Ends the current connection: the next one resumes from the last event id. */
  reconnect(): void {
    void this.streams.at(-1)?.close();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.streams.at(-1)?.close();
    await this.done;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const stream = new ChangeStream(this.pick(), {
        after: this.after,
        lastEventId: this.lastId,
        query: `&owner_id=${this.owner}`,
      });
      this.streams.push(stream);
      await stream.done;
      if (!this.stopped) await sleep(100);
    }
  }
}

/**
 * The newest event of each resource the load touched (by version, occurred_at being distinct):
 * what the feed's last change of it must show.
 */
function newestEvents(events: Json[]): Map<string, { eventId: string; deleted: boolean; owner: string }> {
  const newest = new Map<string, { at: number; eventId: string; deleted: boolean; owner: string }>();
  for (const event of events) {
    const subject = event.data.relationships.subject.data;
    const key = `${subject.type}/${subject.id}`;
    const at = Date.parse(event.data.attributes.created_at);
    if ((newest.get(key)?.at ?? -Infinity) < at)
      newest.set(key, {
        at,
        eventId: event.data.id,
        deleted: event.data.attributes.event_type.endsWith('.destroyed'),
        owner: event.data.relationships.resource_owner.data.id,
      });
  }
  return new Map([...newest].map(([key, { eventId, deleted, owner }]) => [key, { eventId, deleted, owner }]));
}

describe(`fault: fan-out to 230 sinks and SSE clients across a SIGKILL of the dispatcher (seed ${SEED})`, () => {
  let database: TestDatabase;
  let dir: string;
  let hub: SinkHub;
  const encryptionKey = randomBytes(32).toString('base64');
  const followers: Follower[] = [];
  const daemons: DaemonProcess[] = [];

  const start = (roles: string) =>
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
        LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
        RECONCILE_CRON: 'off',
        SANDBOX: 'false',
        SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
        ROLES: roles,
      },
    });

  beforeAll(async () => {
    database = await createTestDatabase();
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-fan-out-'));
    hub = await new SinkHub().start();
  }, SETUP_TIMEOUT_MS);

  afterAll(async () => {
    await Promise.all(followers.map((follower) => follower.stop()));
    // TEST_LOG_DIR keeps each process's output (A, B, B restarted) for a look after a failure.
    if (process.env.TEST_LOG_DIR)
      for (const [i, daemon] of daemons.entries())
        await writeFile(path.join(process.env.TEST_LOG_DIR, `fan-out-${SEED}-${i}.log`), daemon.logs);
    await DaemonProcess.killAll();
    closeAgent();
    await hub?.close();
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(
    'every sink ends with exactly the changes its filter selects, in order per resource, and every SSE client with its owner’s',
    async () => {
      const prng = new SeededPrng(SEED);
      const events = plannedEvents(prng);
      const a = await start('ingress,api,projector');
      let b = await start('ingress,api,sinks');
      daemons.push(a, b);
      let alive = [a, b];
      const anyAlive = () => prng.pick(alive).url;

      const sinks: PlannedSink[] = [];
      const makeWave = async (wave: number) => {
        const planned = Array.from({ length: WAVES[wave].sinks }, (_, i) =>
          plannedSink(prng, hub, sinks.length + i, wave),
        );
        sinks.push(...planned);
        for (let i = 0; i < planned.length; i += 10) {
          await Promise.all(
            planned.slice(i, i + 10).map(async (sink) => {
              const created = await api(a.url, '/api/v1/sinks', API_TOKEN, {
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: JSON.stringify({
                  kind: 'http',
                  url: hub.url(sink.target),
                  from: sink.from,
                  batch_size: sink.batchSize,
                  ...(sink.ownerIds === null ? {} : { owner_ids: sink.ownerIds }),
                  ...(sink.types === null ? {} : { types: sink.types }),
                }),
              });
              expect({ status: created.status, text: created.status === 201 ? '' : created.text }).toEqual({
                status: 201,
                text: '',
              });
              sink.id = created.json.data.id;
              sink.cursor = created.json.data.cursor;
              sink.target.secret = created.json.data.secret;
            }),
          );
        }
      };
      const follow = (count: number, fromHead: boolean, cursor?: string) => {
        for (const owner of prng.sample(STORES, count))
          followers.push(new Follower(owner, fromHead ? cursor : undefined, anyAlive));
      };

      await makeWave(0);
      follow(6, false);
      const load = new Load({
        targets: () => alive.map((daemon) => daemon.url),
        key: WEBHOOK_KEY,
        senders: 4,
        events: EVENTS,
        pauseMs: 150,
        make: (n) => events[n],
      });
      const reach = async (acked: number) => {
        for (const deadline = Date.now() + 120_000; load.ackedCount < acked && Date.now() < deadline;) await sleep(20);
        expect(load.ackedCount).toBeGreaterThanOrEqual(acked);
      };

      await reach(EVENTS / 4);
      await makeWave(1);
      follow(2, false);
      follow(2, true, (await changesAfter(a.url)).cursor);

      await reach(EVENTS / 2);
      const requestsBeforeKill = sinks.reduce((sum, sink) => sum + sink.target.requests.length, 0);
      b.kill('SIGKILL');
      alive = [a];
      expect(await b.waitForExit(10_000)).toEqual({ code: null, signal: 'SIGKILL' });
      const victim = b.url;
      const { PORT: _port, ...env } = b.env;
      b = await DaemonProcess.start({ cwd: dir, env, readyTimeoutMs: 150_000 });
      alive = [a, b];
      const restartedAt = Date.now();
      daemons.push(b);

      await reach((EVENTS * 3) / 4);
      await makeWave(2);
      // Every client resumes once more, from its last event id, on either process.
      for (const follower of followers) follower.reconnect();

      await load.done;
      await load.resend(a.url);
      const unexpected = load.attempts.filter(
        (attempt) => !isAcked(attempt.status) && !(attempt.status === 0 && attempt.target === victim),
      );
      const where = (url: string) => (url === a.url ? 'a' : url === victim ? 'b (killed)' : 'b');
      expect({
        statuses: statusCounts(unexpected),
        first: unexpected.slice(0, 5).map((attempt) => ({
          target: where(attempt.target),
          status: attempt.status,
          ms: attempt.answeredAt - attempt.sentAt,
          sinceRestart: attempt.sentAt - restartedAt,
        })),
      }).toEqual({ statuses: {}, first: [] });
      for (const deadline = Date.now() + 120_000; Date.now() < deadline; await sleep(200)) {
        const lanes = await projections(a.url, API_TOKEN);
        if (lanes.every((lane) => lane.lag === 0)) break;
      }

      // The feed itself: in order per resource, and its newest change of each resource that of the newest event.
      const feed = (await changesAfter(a.url)).changes;
      const readerIndex = new Map(feed.map((change, i) => [change.change_id, i]));
      const lastOfFeed = new Map(feed.map((change) => [resourceKey(change), change]));
      const newest = newestEvents(events);
      expect(
        [...lastOfFeed].map(([key, change]) => [key, change.resource.version.event_id, change.op === 'delete']).sort(),
      ).toEqual(
        [...newest]
          .filter(([key, event]) => lastOfFeed.has(key) || !event.deleted)
          .map(([key, event]) => [key, event.eventId, event.deleted])
          .sort(),
      );
      // A change of a deleted resource whose data an older event fills in keeps the delete's version: equal, not back.
      const previous = new Map<string, Change>();
      const backwards = feed.filter((change) => {
        const before = previous.get(resourceKey(change));
        previous.set(resourceKey(change), change);
        return (
          before !== undefined &&
          (change.seq <= before.seq ||
            Date.parse(change.resource.version.occurred_at) < Date.parse(before.resource.version.occurred_at))
        );
      });
      expect(backwards).toEqual([]);

      const after = new Map<string, Change[]>();
      const expectedOf = async (sink: PlannedSink) => {
        if (sink.from === 'start') return feed.filter((change) => selects(sink, change));
        if (!after.has(sink.cursor!)) after.set(sink.cursor!, (await changesAfter(a.url, sink.cursor)).changes);
        return after.get(sink.cursor!)!.filter((change) => selects(sink, change));
      };
      const expected = new Map<PlannedSink, Change[]>();
      for (const sink of sinks) expected.set(sink, await expectedOf(sink));

      // The kill came while B delivered, and the sinks had changes to deliver after it.
      const requests = () => sinks.reduce((sum, sink) => sum + sink.target.requests.length, 0);
      expect(requestsBeforeKill).toBeGreaterThan(0);
      expect(requests()).toBeGreaterThan(requestsBeforeKill);
      expect(sinks.filter((sink) => expected.get(sink)!.length > 0).length).toBeGreaterThan(sinks.length / 2);
      let problems: string[] = [];
      for (const deadline = Date.now() + 90_000; Date.now() < deadline; await sleep(500)) {
        problems = sinks.flatMap((sink) => sinkProblems(sink, expected.get(sink)!, readerIndex));
        if (problems.length === 0) break;
      }
      expect({ seed: SEED, problems: problems.slice(0, 40), count: problems.length }).toEqual({
        seed: SEED,
        problems: [],
        count: 0,
      });
      expect(hub.strays).toBe(0);

      const wantedBy = async (follower: Follower) =>
        (await changesAfter(a.url, follower.after, `&owner_id=${follower.owner}`)).changes;
      for (const follower of followers) {
        const wanted = await wantedBy(follower);
        for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(200))
          if (follower.changes.length >= wanted.length) break;
        expect({ owner: follower.owner, changes: follower.changes.map((change) => change.change_id) }).toEqual({
          owner: follower.owner,
          changes: wanted.map((change) => change.change_id),
        });
        expect(follower.changes).toEqual(wanted);
        expect(
          follower.streams.map((stream) => stream.status).filter((status) => status !== 200 && status !== 0),
        ).toEqual([]);
      }

      // Every kind of consumer was there: sinks behind and at the head, failing ones, filters of every shape.
      const kinds = {
        fromStartDuringLoad: sinks.filter((sink) => sink.wave > 0 && sink.from === 'start').length > 0,
        failing: sinks.filter((sink) => sink.failing).length > 0,
        everyOwner: sinks.filter((sink) => sink.ownerIds === null).length > 0,
        typed: sinks.filter((sink) => sink.types !== null).length > 0,
        resumedSse: followers.filter((follower) => follower.streams.length > 1).length === followers.length,
      };
      expect(kinds).toEqual({
        fromStartDuringLoad: true,
        failing: true,
        everyOwner: true,
        typed: true,
        resumedSse: true,
      });
      if (process.env.TEST_VERBOSE) {
        const slowest = (url: string) =>
          Math.max(
            ...load.attempts
              .filter((attempt) => attempt.target === url)
              .map((attempt) => attempt.answeredAt - attempt.sentAt),
          );
        process.stderr.write(
          `[fan-out] seed ${SEED}: ${feed.length} changes, ${requests()} sink requests (${requestsBeforeKill} before the kill), ${followers.length} SSE clients; ` +
            `slowest webhook answer of A ${slowest(a.url)} ms, of B restarted ${slowest(b.url)} ms\n`,
        );
      }
    },
    TEST_TIMEOUT_MS,
  );
});

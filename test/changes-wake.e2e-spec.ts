import { ChangeStream } from './support/changes.js';
import { sleep } from './support/daemon-process.js';
import { api, API_TOKEN, deliver, LOOPBACK_NETWORKS, RunningDaemon, startDaemon } from './support/http.js';
import { menuEvent, product } from './support/menu-events.js';
import { SeededPrng, testSeed } from './support/seeded-prng.js';
import { SinkReceiver } from './support/sink-receiver.js';

/**
 * Regression (lost wake, e2e): a head move seen while a reader was reading was lost, and the reader
 * slept out the 15 s safety poll before it saw the change. Twenty SSE clients following one store
 * and an HTTP sink of that store each see every one of 30 changes of it within 3 s, while other
 * stores' changes land just before each (their reads racing its commit) and nothing lands after it
 * until it arrived, to wake a reader that missed it. Against the daemon of before the fix
 * (e94cf66^) a run shows clients at 15.0x s. The unit-level test is
 * src/changes/change-notifier.int-spec.ts.
 */

const SEED = testSeed();
const STORE = 'wake-store';
const OTHERS = ['wake-other-0', 'wake-other-1', 'wake-other-2', 'wake-other-3'];
const ROUNDS = 30;
/** Far below the 15 s safety poll, generous for a loaded machine. */
const BOUND_MS = 3000;
const FOLLOWERS = 20;

/** When each change (by change_id) was first seen by `seen`, polled every 5 ms. */
function stamp(seen: () => Array<{ change_id: string }>): { at: Map<string, number>; stop(): void } {
  const at = new Map<string, number>();
  const timer = setInterval(() => {
    for (const change of seen()) if (!at.has(change.change_id)) at.set(change.change_id, Date.now());
  }, 5);
  return { at, stop: () => clearInterval(timer) };
}

describe(`the change feed never loses a wake (SSE and a sink of one store among others; seed ${SEED})`, () => {
  let app: RunningDaemon;
  let receiver: SinkReceiver;
  const streams: ChangeStream[] = [];

  beforeAll(async () => {
    app = await startDaemon({ SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS, LOG_LEVEL: 'info' });
    receiver = await new SinkReceiver().start();
  });

  afterAll(async () => {
    await Promise.all(streams.map((stream) => stream.close()));
    await receiver?.close();
    await app?.close();
  });

  it(`each of ${ROUNDS} changes of the store reaches its SSE clients and its sink within ${BOUND_MS} ms`, async () => {
    const prng = new SeededPrng(SEED);
    const created = await api(app.url, '/api/v1/sinks', API_TOKEN, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'http', url: receiver.url, from: 'now', owner_ids: [STORE] }),
    });
    expect(created.status).toBe(201);
    receiver.secrets = [created.json.data.secret];
    // Several clients of the store (each of their reads a window for the race), and clients of the
    // others and of everything: the shared read has company.
    const followers = Array.from(
      { length: FOLLOWERS },
      () => new ChangeStream(app.url, { query: `&owner_id=${STORE}` }),
    );
    streams.push(
      ...followers,
      new ChangeStream(app.url),
      ...OTHERS.map((other) => new ChangeStream(app.url, { query: `&owner_id=${other}` })),
    );
    const consumers = [
      ...followers.map((follower, i) => ({ name: `sse ${i}`, changes: () => follower.changes })),
      { name: 'sink', changes: () => receiver.acknowledgedChanges },
    ].map((consumer) => ({ ...consumer, ...stamp(consumer.changes) }));
    let n = 0;
    const event = (owner: string, id: string) =>
      menuEvent('created', product(id, { title: `Product ${id} #${n}` }), {
        at: new Date(Date.parse('2024-09-01T10:00:00.000Z') + n * 1000).toISOString(),
        ownerId: owner,
        eventId: `wake-${SEED}-${n++}`,
      });
    const arrival = (consumer: (typeof consumers)[number], id: string) => {
      const change = consumer.changes().find((c) => c.id === id);
      return change === undefined ? undefined : consumer.at.get(change.change_id);
    };
    // Every follower is at the head before the rounds begin.
    await deliver(app.url, event(STORE, '700000'));
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(20))
      if (consumers.every((consumer) => arrival(consumer, '700000') !== undefined)) break;
    expect(consumers.filter((consumer) => arrival(consumer, '700000') === undefined).map((c) => c.name)).toEqual([]);

    const late: Array<{ round: number; consumer: string; ms: number }> = [];
    let worst = 0;
    for (let round = 0; round < ROUNDS; round++) {
      await sleep(prng.int(0, 300));
      // Other stores' changes land just before the store's: the reads they wake are under way
      // when it commits; after it nothing lands until it arrived, so only its own wake brings it.
      const others = Array.from({ length: prng.int(1, 4) }, () => {
        const other = prng.int(0, OTHERS.length - 1);
        return deliver(app.url, event(OTHERS[other], String(710_000 + other * 100 + prng.int(0, 20))));
      });
      await sleep(prng.int(0, 40));
      const id = String(700_001 + round);
      const answer = await deliver(app.url, event(STORE, id));
      const posted = Date.now();
      const statuses = [...(await Promise.all(others)), answer].map((delivered) => delivered.status);
      expect(statuses).toEqual(statuses.map(() => 202));
      for (const deadline = posted + 20_000; Date.now() < deadline; await sleep(5))
        if (consumers.every((consumer) => arrival(consumer, id) !== undefined)) break;
      for (const consumer of consumers) {
        const ms = (arrival(consumer, id) ?? Infinity) - posted;
        worst = Math.max(worst, ms);
        if (!(ms < BOUND_MS)) late.push({ round, consumer: consumer.name, ms });
      }
    }
    for (const consumer of consumers) consumer.stop();
    expect(late).toEqual([]);
    const ids = Array.from({ length: ROUNDS + 1 }, (_, i) => String(700_000 + i));
    for (const follower of followers) {
      expect(follower.changes.map((change) => change.id)).toEqual(ids);
      expect(follower.changes.map((change) => change.owner_id)).toEqual(ids.map(() => STORE));
    }
    expect([...new Set(receiver.acknowledgedChanges.map((change) => change.id))].sort()).toEqual(ids);
    if (process.env.TEST_VERBOSE) process.stderr.write(`[wake] seed ${SEED}: worst ${worst} ms\n`);
  }, 300_000);
});

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { insertChanges, newestByResource } from './support/change-log-factory.js';
import { DaemonProcess } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, LOOPBACK_NETWORKS, RunningDaemon, scrape, startDaemon } from './support/http.js';
import { settledSink, SinkReceiver } from './support/sink-receiver.js';

/**
 * docs/reference.md §11: the daemons' dispatchers share the sinks (a lease per sink), and when the
 * daemon delivering a sink dies another takes its lease; and a sink whose cursor fell behind the change log's compaction
 * horizon, which first publishes the current state of every resource it follows, then goes on.
 */
type Json = any;

const ACTIVE = 'this daemon is the active sink dispatcher';
const BEHIND = 'sink cursor is older than the change log keeps';

const post = (url: string, path: string, body: unknown) =>
  api(url, path, API_TOKEN, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

const resources = (ownerId: string, count: number, round: number) =>
  Array.from({ length: count }, (_, n) => ({
    type: n % 3 === 0 ? 'collection' : 'product',
    id: `${ownerId}-${n}`,
    ownerId,
    attributes: { round, n },
  }));

function expectConverged(receiver: SinkReceiver, expected: Map<string, Json>): void {
  expect(new Map([...receiver.catalogue].map(([key, change]) => [key, change.change_id]))).toEqual(
    new Map([...expected].map(([key, change]) => [key, change.change_id])),
  );
}

async function createSink(url: string, receiver: SinkReceiver, body: Json): Promise<Json> {
  const created = await post(url, '/api/v1/sinks', { kind: 'http', url: receiver.url, from: 'start', ...body });
  expect(created.status).toBe(201);
  receiver.secrets = [created.json.data.secret];
  return created.json.data;
}

describe('the sink dispatcher across daemons, and a sink behind the compaction horizon (docs/reference.md §11)', () => {
  const receivers: SinkReceiver[] = [];
  const receiver = async () => {
    const started = await new SinkReceiver().start();
    receivers.push(started);
    return started;
  };

  afterAll(async () => {
    await DaemonProcess.killAll();
    await Promise.all(receivers.map((r) => r.close()));
  });

  it("when the daemon delivering a sink dies, another daemon's dispatcher takes its lease: every change arrives, never two batches at once", async () => {
    const first = await startDaemon({ SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS });
    const dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-standby-'));
    let second: DaemonProcess | undefined;
    try {
      await eventually(async () => expect(first.process.logs).toContain(ACTIVE), 10000, 50);
      const { PORT: _port, DATA_DIR: _dataDir, ...env } = first.process.env;
      second = await DaemonProcess.start({ cwd: dir, env: { ...env, DATA_DIR: dir } });
      const daemons = [first.process, second];
      // Both are dispatchers, sharing the sinks.
      for (const daemon of daemons)
        await eventually(async () => expect(await scrape(daemon.url, 'menu_sync_sink_dispatchers')).toBe(2), 10000, 50);
      const target = await receiver();
      target.always = { status: 204, delayMs: 100 };
      const sink = await createSink(second.url, target, { owner_ids: ['t1'], batch_size: 5 });
      const inserted = await insertChanges(first.database.url, resources('t1', 150, 1));
      await eventually(async () => expect(target.acknowledgedChanges.length).toBeGreaterThanOrEqual(20), 20000, 10);
      // One sink, one lease: exactly one of them delivers it.
      const leased = await Promise.all(
        daemons.map((daemon) => scrape(daemon.url, 'menu_sync_sink_leased', { sink: sink.id })),
      );
      expect([...leased].sort()).toEqual([0, 1]);
      const [holder, other] = leased[0] === 1 ? daemons : [second, first.process];

      holder.kill('SIGKILL');
      await holder.waitForExit(10000);
      await eventually(
        async () => expect(await scrape(other.url, 'menu_sync_sink_leased', { sink: sink.id })).toBe(1),
        15000,
        50,
      );
      await eventually(
        async () => {
          const acknowledged = new Set(target.acknowledgedChanges.map((change) => change.change_id));
          expect(inserted.filter((change) => !acknowledged.has(change.change_id))).toEqual([]);
        },
        30000,
        100,
      );
      expectConverged(target, newestByResource(inserted));
      // One batch in flight per sink, across both daemons and the takeover.
      expect(target.maxInFlight).toBe(1);
      await settledSink(other.url, sink.id, { state: 'active', lag: 0 });
    } finally {
      second?.kill('SIGTERM');
      await second?.waitForExit(15000);
      await first.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 180_000);

  describe('retention', () => {
    let app: RunningDaemon;

    beforeAll(async () => {
      app = await startDaemon({ CHANGES_RETENTION: '1s', SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS });
    }, 120_000);

    afterAll(async () => {
      await app?.close();
    });

    it('a sink whose cursor fell behind the compaction horizon publishes the current state of every resource, then goes on', async () => {
      const target = await receiver();
      const sink = await createSink(app.url, target, { owner_ids: ['h1'], batch_size: 50 });
      const first = await insertChanges(app.database.url, resources('h1', 10, 1));
      await eventually(async () => expectConverged(target, newestByResource(first)), 20000, 50);

      // The target goes down; meanwhile every resource changes twice, and five new ones appear.
      target.always = { status: 503 };
      const second = await insertChanges(app.database.url, resources('h1', 15, 2));
      const third = await insertChanges(app.database.url, resources('h1', 5, 3));
      // Compaction (everything older than 1 s but the newest of each resource) removes changes
      // after the sink's cursor: the next attempt finds the cursor behind the horizon.
      await eventually(async () => expect(app.process.logs).toContain(BEHIND), 30000, 100);
      target.always = undefined;

      const all = [...first, ...second, ...third];
      await eventually(async () => expectConverged(target, newestByResource(all)), 60000, 100);
      // After the state from the start, the sink goes on from the head. The target can hold every
      // newest state a moment before the sink has settled at the head (a loaded machine's full run
      // read state retrying, lag 15, right then): settled within seconds, not at once.
      await eventually(
        async () =>
          expect((await api(app.url, `/api/v1/sinks/${sink.id}`)).json.data).toMatchObject({ state: 'active', lag: 0 }),
        20000,
        100,
      );
      const more = await insertChanges(app.database.url, resources('h1', 2, 4));
      await eventually(async () => expectConverged(target, newestByResource([...all, ...more])), 20000, 50);
    });
  });
});

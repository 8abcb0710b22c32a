import { randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { insertChanges, newestByResource } from './support/change-log-factory.js';
import { DaemonProcess } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, LOOPBACK_NETWORKS, RunningDaemon, scrape, startDaemon } from './support/http.js';
import { ensureNats, NATS_URL } from './support/nats.js';
import { settledSink, SinkReceiver } from './support/sink-receiver.js';

type Json = any;

const post = (url: string, path: string, body: unknown) =>
  api(url, path, API_TOKEN, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

/** Distinct resources of one owner, each changed once: every change must arrive. */
const distinct = (ownerId: string, count: number) =>
  Array.from({ length: count }, (_, n) => ({
    type: n % 3 === 0 ? 'collection' : 'product',
    id: `${ownerId}-${n}`,
    ownerId,
  }));

describe('sinks across crashes, and to NATS JetStream (docs/reference.md §11)', () => {
  let app: RunningDaemon;
  let nc: NatsConnection;
  /** The daemon's address: the restarted one's after the SIGKILL test. */
  let baseUrl: string;
  const receivers: SinkReceiver[] = [];
  const streams: string[] = [];

  beforeAll(async () => {
    nc = await ensureNats();
    app = await startDaemon({ NATS_URL, SINK_FAILING_AFTER: '2s', SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS });
    baseUrl = app.url;
  });

  afterAll(async () => {
    await DaemonProcess.killAll();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    const jsm = await jetstreamManager(nc);
    for (const stream of streams) await jsm.streams.delete(stream).catch(() => undefined);
    await nc?.close();
    await app?.close();
  });

  it('converges with no gap after a SIGKILL of the daemon in the middle of a delivery', async () => {
    const receiver = await new SinkReceiver().start();
    receivers.push(receiver);
    receiver.always = { status: 204, delayMs: 150 };
    const created = await post(app.url, '/api/v1/sinks', {
      kind: 'http',
      url: receiver.url,
      from: 'start',
      owner_ids: ['k1'],
      batch_size: 5,
    });
    receiver.secrets = [created.json.data.secret];
    const inserted = await insertChanges(app.database.url, distinct('k1', 120));
    await eventually(async () => expect(receiver.received.length).toBeGreaterThanOrEqual(4), 20000, 10);

    app.process.kill('SIGKILL');
    await app.process.waitForExit(10000);
    const before = receiver.received.length;
    const { PORT: _port, ...env } = app.process.env;
    const restarted = await DaemonProcess.start({ cwd: app.process.cwd, env });

    await eventually(
      async () => {
        const acknowledged = new Set(receiver.acknowledgedChanges.map((change) => change.change_id));
        expect(inserted.filter((change) => !acknowledged.has(change.change_id))).toEqual([]);
      },
      60000,
      100,
    );
    expect(receiver.received.length).toBeGreaterThan(before);
    expect(receiver.received.length).toBeLessThan(before + 30);
    await settledSink(restarted.url, created.json.data.id, { state: 'active', lag: 0 });
    baseUrl = restarted.url;
  });

  it('shows a sink failing after SINK_FAILING_AFTER, still retrying, and resumes where it stopped', async () => {
    const receiver = await new SinkReceiver().start();
    receivers.push(receiver);
    receiver.always = { status: 503 };
    const created = await post(baseUrl, '/api/v1/sinks', {
      kind: 'http',
      url: receiver.url,
      from: 'start',
      owner_ids: ['k2'],
    });
    receiver.secrets = [created.json.data.secret];
    const id = created.json.data.id;
    const inserted = await insertChanges(app.database.url, distinct('k2', 6));
    await eventually(
      async () =>
        expect((await api(baseUrl, `/api/v1/sinks/${id}`)).json.data).toMatchObject({
          state: 'failing',
          lag: 6,
          last_error: expect.stringContaining('503'),
        }),
      30000,
      100,
    );
    await eventually(
      async () => expect(await scrape(baseUrl, 'menu_sync_sinks_failing')).toBeGreaterThanOrEqual(1),
      5000,
      100,
    );
    receiver.always = undefined;
    await post(baseUrl, `/api/v1/sinks/${id}/replay`, {
      from: (await api(baseUrl, `/api/v1/sinks/${id}`)).json.data.cursor,
    });
    await eventually(async () => expect(receiver.catalogue.size).toBe(inserted.length), 20000, 50);
    await settledSink(baseUrl, id, { state: 'active', failing_since: null, lag: 0 });
  });

  it('publishes every change to JetStream, read back with the official client equal to the newest state, no Nats-Msg-Id twice', async () => {
    const suffix = randomBytes(4).toString('hex');
    const stream = `MENU_SYNC_TEST_${suffix}`;
    const prefix = `menutest${suffix}`;
    streams.push(stream);
    const inserted = await insertChanges(app.database.url, [
      ...distinct('n1', 10),
      ...distinct('n1', 10),
      { type: 'product', id: 'n1-1', ownerId: 'n1', op: 'delete' as const },
    ]);
    const created = await post(baseUrl, '/api/v1/sinks', {
      kind: 'nats',
      from: 'start',
      stream,
      subject_prefix: prefix,
      owner_ids: ['n1'],
      batch_size: 7,
    });
    expect(created.status).toBe(201);
    expect(created.json.data).toMatchObject({ kind: 'nats', stream, subject_prefix: prefix });
    expect(created.json.data.secret).toBeUndefined();
    const id = created.json.data.id;
    await settledSink(baseUrl, id, { lag: 0, state: 'active' }, 20000);

    // a replay publishes everything again: JetStream drops the repeats by Nats-Msg-Id
    const published = await scrape(baseUrl, 'menu_sync_sink_deliveries_total', { sink: id, outcome: 'ok' });
    expect(published).toBe(Math.ceil(inserted.length / 7));
    expect((await post(baseUrl, `/api/v1/sinks/${id}/replay`, { from: 'start' })).status).toBe(200);
    await eventually(
      async () => {
        expect(await scrape(baseUrl, 'menu_sync_sink_deliveries_total', { sink: id, outcome: 'ok' })).toBe(
          2 * published,
        );
        expect((await api(baseUrl, `/api/v1/sinks/${id}`)).json.data.lag).toBe(0);
      },
      20000,
      100,
    );

    // Each batch's attempt shows what JetStream acknowledged: after the replay, only duplicates.
    const attempts = await eventually(async () => {
      const data = (await api(baseUrl, `/api/v1/sinks/${id}/attempts`)).json.data.filter(
        (attempt: Json) => attempt.outcome === 'ok',
      );
      expect(data).toHaveLength(2 * published);
      return data;
    });
    const lastBatch = { first_seq: inserted[14].seq, last_seq: inserted[20].seq, changes: 7 };
    for (const [n, duplicates] of [
      [0, 7],
      [published, 0],
    ]) {
      expect(attempts[n]).toMatchObject({ batch: lastBatch, webhook_id: null, status: 0, error: null });
      expect(JSON.parse(attempts[n].response)).toEqual({ stream, acks: 7, last_seq: inserted.length, duplicates });
    }

    const messages = await readStream(nc, stream);
    const ids = messages.map((message) => message.msgId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(messages).toHaveLength(inserted.length);
    for (const message of messages) {
      expect(message.subject).toBe(`${prefix}.n1.${message.change.type}.${message.change.id}`);
      expect(message.msgId).toBe(message.change.change_id);
    }
    const got = newestByResource(messages.map((message) => message.change));
    expect(new Map([...got].map(([key, change]) => [key, change.change_id]))).toEqual(
      new Map([...newestByResource(inserted)].map(([key, change]) => [key, change.change_id])),
    );
    expect(got.get('product/n1-1')).toMatchObject({ op: 'delete' });
  });
});

async function readStream(
  nc: NatsConnection,
  stream: string,
): Promise<Array<{ subject: string; msgId: string; change: Json }>> {
  const consumer = await jetstream(nc).consumers.get(stream);
  const out = [];
  const messages = await consumer.fetch({ max_messages: 10000, expires: 2000 });
  for await (const message of messages) {
    out.push({ subject: message.subject, msgId: message.headers?.get('Nats-Msg-Id') ?? '', change: message.json() });
    if (message.info.pending === 0) break;
  }
  return out;
}

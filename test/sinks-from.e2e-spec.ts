import { insertChanges, sqlQuery } from './support/change-log-factory.js';
import { eventually } from './support/eventually.js';
import {
  api,
  LOOPBACK_NETWORKS,
  RunningDaemon,
  startDaemon,
  sendJson,
  expectFieldProblem as expectProblem,
} from './support/http.js';
import { SinkReceiver } from './support/sink-receiver.js';

type Json = any;
type Inserted = Array<{ seq: number; change_id: string; type: string; id: string }>;

const post = (app: RunningDaemon, path: string, body: unknown) => sendJson(app, 'POST', path, body);

const ids = (changes: Inserted) => changes.map((change) => change.change_id);

describe('where a sink starts: from snapshot, start, now or a cursor (docs/reference.md §12)', () => {
  let app: RunningDaemon;
  const receivers: SinkReceiver[] = [];

  beforeAll(async () => {
    app = await startDaemon({ SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS });
  });

  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await app?.close();
  });

  async function sinkFrom(body: Json): Promise<{ sink: Json; target: SinkReceiver }> {
    const target = await new SinkReceiver().start();
    receivers.push(target);
    const answer = await post(app, '/api/v1/sinks', { kind: 'http', url: target.url, owner_ids: ['f1'], ...body });
    expect(answer.status).toBe(201);
    target.secrets = [answer.json.data.secret];
    return { sink: answer.json.data, target };
  }

  /** The change ids a receiver acknowledged, in the order it received them. */
  const received = (target: SinkReceiver) => target.acknowledgedChanges.map((change) => change.change_id);

  it('refuses a malformed from, naming it, and stores nothing', async () => {
    for (const from of ['yesterday!', 'bm90LWEtY3Vyc29y', 7, '']) {
      expectProblem(await post(app, '/api/v1/sinks', { kind: 'http', url: 'http://127.0.0.1:1/x', from }), 400, 'from');
    }
    expect((await api(app.url, '/api/v1/sinks')).json.data).toEqual([]);
  });

  it('delivers from each start point exactly what it names, then the changes after it', async () => {
    const first = await insertChanges(app.database.url, [
      { type: 'product', id: 'f1-0', ownerId: 'f1' },
      { type: 'product', id: 'f1-1', ownerId: 'f1' },
      { type: 'product', id: 'f1-2', ownerId: 'f1' },
      { type: 'product', id: 'f1-3', ownerId: 'f1' },
      { type: 'collection', id: 'f1-4', ownerId: 'f1' },
      { type: 'product', id: 'other-0', ownerId: 'other' },
    ]);
    // Read until whole: a page read just after the commit may come out short while another
    // database's transaction holds the readers' horizon back (docs/design.md, Fan-out).
    const page = await eventually(async () => {
      const read = (await api(app.url, '/api/v1/changes?owner_id=f1&limit=5')).json;
      expect(read.data.map((change: Json) => change.change_id)).toEqual(ids(first.slice(0, 5)));
      return read;
    });
    const cursor = page.next_cursor;
    const second = await insertChanges(app.database.url, [
      { type: 'product', id: 'f1-0', ownerId: 'f1' },
      { type: 'product', id: 'f1-1', ownerId: 'f1' },
      { type: 'product', id: 'f1-2', ownerId: 'f1', op: 'delete' },
    ]);
    const live = [first[3], first[4], second[0], second[1]].sort((a, b) => a.seq - b.seq);

    const snapshot = await sinkFrom({ from: 'snapshot', batch_size: 2 });
    const byDefault = await sinkFrom({});
    const collections = await sinkFrom({ from: 'snapshot', types: ['collection'] });
    // One change a batch: a batch may leave out a change that a newer one of its resource supersedes.
    const start = await sinkFrom({ from: 'start', batch_size: 1 });
    const now = await sinkFrom({ from: 'now', batch_size: 1 });
    const after = await sinkFrom({ from: cursor, batch_size: 1 });

    await eventually(
      async () => {
        expect(received(snapshot.target)).toEqual(ids(live));
        expect(received(byDefault.target)).toEqual(ids(live));
        expect(received(collections.target)).toEqual(ids([first[4]]));
        expect(received(start.target)).toEqual(ids([...first.slice(0, 5), ...second]));
        expect(received(after.target)).toEqual(ids(second));
      },
      30000,
      100,
    );
    // A snapshot is one upsert per live resource: the deleted one is left out.
    expect(snapshot.target.acknowledgedChanges.every((change) => change.op === 'upsert')).toBe(true);
    expect(received(now.target)).toEqual([]);

    const third = await insertChanges(app.database.url, [
      { type: 'product', id: 'f1-0', ownerId: 'f1' },
      { type: 'product', id: 'f1-3', ownerId: 'f1', op: 'delete' },
    ]);
    await eventually(
      async () => {
        expect(received(snapshot.target)).toEqual(ids([...live, ...third]));
        expect(received(byDefault.target)).toEqual(ids([...live, ...third]));
        expect(received(start.target)).toEqual(ids([...first.slice(0, 5), ...second, ...third]));
        expect(received(now.target)).toEqual(ids(third));
        expect(received(after.target)).toEqual(ids([...second, ...third]));
        for (const { sink } of [snapshot, byDefault, start, now, after]) {
          expect((await api(app.url, `/api/v1/sinks/${sink.id}`)).json.data.lag).toBe(0);
        }
      },
      30000,
      100,
    );
    expect(received(collections.target)).toEqual(ids([first[4]]));
    // A delivered snapshot leaves nothing behind.
    await eventually(async () =>
      expect(await sqlQuery(app.database.url, `SELECT count(*)::int AS n FROM sink_snapshot_entries`)).toEqual([
        { n: 0 },
      ]),
    );

    // Replays take the same values.
    now.target.received.length = 0;
    const replayed = await post(app, `/api/v1/sinks/${now.sink.id}/replay`, { from: 'snapshot' });
    expect(replayed.status).toBe(200);
    const liveNow = [first[4], second[1], third[0]].sort((a, b) => a.seq - b.seq);
    await eventually(async () => expect(received(now.target)).toEqual(ids(liveNow)), 30000, 100);

    start.target.received.length = 0;
    expect((await post(app, `/api/v1/sinks/${start.sink.id}/replay`, { from: 'now' })).status).toBe(200);
    const fourth = await insertChanges(app.database.url, [{ type: 'product', id: 'f1-5', ownerId: 'f1' }]);
    await eventually(async () => expect(received(start.target)).toEqual(ids(fourth)), 30000, 100);

    for (const from of ['snapshots', 'bm90LWEtY3Vyc29y']) {
      expectProblem(await post(app, `/api/v1/sinks/${start.sink.id}/replay`, { from }), 400, 'from');
    }
  });
});

import { insertChanges, sqlQuery } from './support/change-log-factory.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, RunningDaemon, startDaemon, expectFieldProblem as expectProblem } from './support/http.js';
import { createPostgresTarget, PostgresTarget } from './support/postgres-target.js';
import { SinkReceiver } from './support/sink-receiver.js';

type Json = any;

/** A signing secret and a bearer token the target echoes back: neither may be kept in clear. */
const LEAKY_BODY = JSON.stringify({
  error: 'signature mismatch',
  hint: 'whsec_c2VjcmV0LWtleS1vZi10aGUtdGFyZ2V0LTEyMzQ1',
  seen: 'Bearer tok-live-0123-abcd',
});

describe('delivery attempts of a sink (docs/reference.md §12)', () => {
  let app: RunningDaemon;
  const receivers: SinkReceiver[] = [];
  const receiver = async () => {
    const started = await new SinkReceiver().start();
    receivers.push(started);
    return started;
  };
  async function createSink(target: SinkReceiver, body: Json): Promise<Json> {
    const answer = await api(app.url, '/api/v1/sinks', API_TOKEN, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'http', url: target.url, ...body }),
    });
    expect(answer.status).toBe(201);
    target.secrets = [answer.json.data.secret];
    return answer.json.data;
  }
  const attempts = (id: string, query = '') => api(app.url, `/api/v1/sinks/${id}/attempts${query}`);

  beforeAll(async () => {
    app = await startDaemon({ SINK_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128' });
  });

  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await app?.close();
  });

  it('records a 500, a timeout (status 0) and a 200 of one batch, newest first, with the answer redacted, and pages through them', async () => {
    const target = await receiver();
    target.script = [{ status: 500, body: LEAKY_BODY }, { hangMs: 8000 }, { status: 200, body: '{"ok":true}' }];
    const inserted = await insertChanges(app.database.url, [
      { type: 'product', id: 'a1', ownerId: 'attempts-1' },
      { type: 'product', id: 'a2', ownerId: 'attempts-1' },
      { type: 'collection', id: 'a3', ownerId: 'attempts-1' },
    ]);
    const sink = await createSink(target, { owner_ids: ['attempts-1'], timeout_ms: 1500 });

    const all = await eventually(
      async () => {
        const answer = await attempts(sink.id);
        expect(answer.status).toBe(200);
        expect(answer.json.data.map((attempt: Json) => attempt.outcome)).toEqual(['ok', 'retry', 'retry']);
        return answer.json;
      },
      30000,
      100,
    );
    expect(target.received).toHaveLength(3);
    const webhookId = target.received[0].webhookId;
    expect(target.received.map((request) => request.webhookId)).toEqual([webhookId, webhookId, webhookId]);
    const batch = { first_seq: inserted[0].seq, last_seq: inserted[2].seq, changes: 3 };
    expect(all.next_cursor).toBeNull();
    const [ok, timedOut, failed] = all.data;
    expect(ok).toEqual({
      at: expect.any(String),
      batch,
      webhook_id: webhookId,
      outcome: 'ok',
      status: 200,
      duration_ms: expect.any(Number),
      error: null,
      response: '{"ok":true}',
    });
    expect(timedOut).toEqual({
      at: expect.any(String),
      batch,
      webhook_id: webhookId,
      outcome: 'retry',
      status: 0,
      duration_ms: expect.any(Number),
      error: 'no answer within 1500 ms',
      response: null,
    });
    expect(timedOut.duration_ms).toBeGreaterThanOrEqual(1490);
    expect(failed).toEqual({
      at: expect.any(String),
      batch,
      webhook_id: webhookId,
      outcome: 'retry',
      status: 500,
      duration_ms: expect.any(Number),
      error: 'the target answered 500',
      response: '{"error":"signature mismatch","hint":"whsec_[REDACTED]","seen":"Bearer [REDACTED]"}',
    });
    const times = all.data.map((attempt: Json) => Date.parse(attempt.at));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    const stored = await sqlQuery(app.database.url, `SELECT response, error FROM menu_sync_sink_attempts`);
    expect(JSON.stringify(stored)).not.toMatch(/c2VjcmV0|tok-live/);

    const first = await attempts(sink.id, '?limit=1');
    expect(first.json.data).toEqual([ok]);
    expect(first.json.next_cursor).toEqual(expect.any(String));
    const second = await attempts(sink.id, `?limit=1&before=${first.json.next_cursor}`);
    expect(second.json.data).toEqual([timedOut]);
    const third = await attempts(sink.id, `?before=${second.json.next_cursor}&limit=1`);
    expect(third.json).toEqual({ data: [failed], next_cursor: null });
    const rest = await attempts(sink.id, `?limit=2&before=${first.json.next_cursor}`);
    expect(rest.json).toEqual({ data: [timedOut, failed], next_cursor: null });
  });

  it('records a 410 as disabled', async () => {
    const target = await receiver();
    target.always = { status: 410, body: 'gone' };
    await insertChanges(app.database.url, [{ type: 'product', id: 'g1', ownerId: 'attempts-2' }]);
    const sink = await createSink(target, { owner_ids: ['attempts-2'] });
    const [attempt] = await eventually(async () => {
      const answer = await attempts(sink.id);
      expect(answer.json.data).toHaveLength(1);
      return answer.json.data;
    });
    expect(attempt).toMatchObject({ outcome: 'disabled', status: 410, response: 'gone', batch: { changes: 1 } });
    expect((await api(app.url, `/api/v1/sinks/${sink.id}`)).json.data.state).toBe('disabled');
  });

  it('records a table sink\'s committed batch as status "committed" with the changes it applied, one per row', async () => {
    let target: PostgresTarget | undefined;
    try {
      target = await createPostgresTarget();
      const owner = 'attempts-3';
      const inserted = await insertChanges(app.database.url, [
        { type: 'product', id: 't1', ownerId: owner },
        { type: 'product', id: 't2', ownerId: owner },
        { type: 'product', id: 't1', ownerId: owner, op: 'delete' },
        { type: 'collection', id: 't3', ownerId: owner },
        { type: 'store', id: 't4', ownerId: owner },
      ]);
      const created = await api(app.url, '/api/v1/sinks', API_TOKEN, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          kind: 'postgres',
          url: target.url,
          owner_ids: [owner],
          types: ['product', 'collection'],
          from: 'start',
        }),
      });
      expect(created.status).toBe(201);
      const [attempt] = await eventually(async () => {
        const answer = await attempts(created.json.data.id);
        expect(answer.json.data).toHaveLength(1);
        return answer.json.data;
      });
      // The store is not followed: the batch holds the four other changes, and t1 only as deleted.
      expect(attempt).toEqual({
        at: expect.any(String),
        batch: { first_seq: inserted[0].seq, last_seq: inserted[3].seq, changes: 4 },
        webhook_id: null,
        outcome: 'ok',
        status: 'committed',
        duration_ms: expect.any(Number),
        error: null,
        response: 'committed: 3 changes, one per row (2 upserts, 1 delete)',
      });
      const rows = await target.admin.query(
        `SELECT id FROM menu_sync.products UNION ALL SELECT id FROM menu_sync.collections ORDER BY id`,
      );
      expect(rows.rows).toEqual([{ id: 't2' }, { id: 't3' }]);
    } finally {
      await target?.drop();
    }
  });

  it('answers 400 naming limit or before for a bad one, and 404 for an unknown sink', async () => {
    const target = await receiver();
    const sink = await createSink(target, { owner_ids: ['nobody'] });
    for (const limit of ['0', '1001', 'ten', '-1', '1.5']) {
      expectProblem(await attempts(sink.id, `?limit=${limit}`), 400, 'limit');
    }
    for (const before of ['not!a-cursor', 'YWJj', Buffer.from('a0').toString('base64url')]) {
      expectProblem(await attempts(sink.id, `?before=${before}`), 400, 'before');
    }
    expect(await attempts(sink.id)).toMatchObject({ status: 200, json: { data: [], next_cursor: null } });
    expect((await attempts('00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await attempts('not-a-uuid')).status).toBe(404);
    expect((await api(app.url, `/api/v1/sinks/${sink.id}/attempts`, null)).status).toBe(401);
  });
});

import { Webhook } from 'standardwebhooks';
import { runCli } from './support/cli.js';
import { insertChanges, newestByResource, sqlQuery } from './support/change-log-factory.js';
import { eventually } from './support/eventually.js';
import {
  api,
  API_TOKEN,
  deliver,
  LOOPBACK_NETWORKS,
  RunningDaemon,
  scrape,
  startDaemon,
  sendJson,
  expectFieldProblem as expectProblem,
} from './support/http.js';
import { SinkReceiver } from './support/sink-receiver.js';
import { webhookEvent } from './support/webhook-events.js';

type Json = any;

const post = (app: RunningDaemon, path: string, body: unknown) => sendJson(app, 'POST', path, body);
const patch = (app: RunningDaemon, path: string, body: unknown) => sendJson(app, 'PATCH', path, body);

/** Changes of one owner: products and a collection, each resource changed several times, one deleted. */
function plan(ownerId: string, resources = 12, rounds = 3) {
  const inputs = [];
  for (let round = 0; round < rounds; round++) {
    for (let n = 0; n < resources; n++) {
      inputs.push({
        type: n % 4 === 0 ? 'collection' : 'product',
        id: `${ownerId}-${n}`,
        ownerId,
        op: round === rounds - 1 && n === 1 ? ('delete' as const) : ('upsert' as const),
        attributes: { name: `v${round}`, n },
      });
    }
  }
  return inputs;
}

function expectConverged(receiver: SinkReceiver, expected: Map<string, Json>): void {
  expect(new Map([...receiver.catalogue].map(([key, change]) => [key, change.change_id]))).toEqual(
    new Map([...expected].map(([key, change]) => [key, change.change_id])),
  );
}

describe('HTTP sinks against the real daemon (docs/reference.md §11)', () => {
  let app: RunningDaemon;
  const receivers: SinkReceiver[] = [];
  const receiver = async () => {
    const started = await new SinkReceiver().start();
    receivers.push(started);
    return started;
  };
  async function createSink(target: SinkReceiver, body: Json = {}): Promise<Json> {
    target.secretsPending = true;
    try {
      const answer = await post(app, '/api/v1/sinks', { kind: 'http', url: target.url, from: 'start', ...body });
      expect(answer.status).toBe(201);
      target.secrets = [answer.json.data.secret];
      return answer.json.data;
    } finally {
      target.secretsPending = false;
    }
  }

  beforeAll(async () => {
    app = await startDaemon({ SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS });
  });

  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await app?.close();
  });

  describe('bad bodies', () => {
    it.each([
      ['no kind', { url: 'http://127.0.0.1:1/x' }, 400, 'kind'],
      ['an unknown kind', { kind: 'smtp', url: 'http://127.0.0.1:1/x' }, 400, 'kind'],
      ['an http sink without url', { kind: 'http' }, 400, 'url'],
      ['a url that is not http(s)', { kind: 'http', url: 'ftp://example.com/x' }, 400, 'url'],
      ['a url that is no URL', { kind: 'http', url: 'not a url' }, 400, 'url'],
      ['an unknown type', { kind: 'http', url: 'http://127.0.0.1:1/x', types: ['product', 'menu_item'] }, 400, 'types'],
      ['types not an array', { kind: 'http', url: 'http://127.0.0.1:1/x', types: 'product' }, 400, 'types'],
      ['owner_ids of numbers', { kind: 'http', url: 'http://127.0.0.1:1/x', owner_ids: [1] }, 400, 'owner_ids'],
      ['batch_size 0', { kind: 'http', url: 'http://127.0.0.1:1/x', batch_size: 0 }, 400, 'batch_size'],
      ['timeout_ms as a string', { kind: 'http', url: 'http://127.0.0.1:1/x', timeout_ms: '100' }, 400, 'timeout_ms'],
      ['an unknown field', { kind: 'http', url: 'http://127.0.0.1:1/x', secret: 'whsec_mine' }, 400, 'secret'],
      ['a stream on an http sink', { kind: 'http', url: 'http://127.0.0.1:1/x', stream: 'S' }, 400, 'stream'],
      ['a nats sink without NATS_URL', { kind: 'nats' }, 422, 'kind'],
    ])('answers problem+json naming the field for %s, and stores nothing', async (_name, body, status, field) => {
      expectProblem(await post(app, '/api/v1/sinks', body), status, field);
      expect((await api(app.url, '/api/v1/sinks')).json.data).toEqual([]);
      expect(await sqlQuery(app.database.url, 'SELECT id FROM sinks')).toEqual([]);
    });

    it('answers 404 for an unknown or malformed sink id and 400 naming from for a malformed replay cursor', async () => {
      expect(
        (await post(app, '/api/v1/sinks/00000000-0000-4000-8000-000000000000/replay', { from: 'start' })).status,
      ).toBe(404);
      expect((await api(app.url, '/api/v1/sinks/not-a-uuid')).status).toBe(404);
      expect((await api(app.url, '/api/v1/sinks/not-a-uuid', API_TOKEN, { method: 'DELETE' })).status).toBe(404);
      const target = await receiver();
      const sink = await createSink(target, { owner_ids: ['nobody'] });
      expectProblem(await post(app, `/api/v1/sinks/${sink.id}/replay`, { from: 'not!a cursor' }), 400, 'from');
      expectProblem(await post(app, `/api/v1/sinks/${sink.id}/replay`, { from: 'bm90LWEtY3Vyc29y' }), 400, 'from');
      expectProblem(await patch(app, `/api/v1/sinks/${sink.id}`, { state: 'failing' }), 400, 'state');
      expectProblem(await patch(app, `/api/v1/sinks/${sink.id}`, { url: 'mailto:x@example.com' }), 400, 'url');
      expect((await api(app.url, `/api/v1/sinks/${sink.id}`)).json.data).toMatchObject({
        url: target.url,
        state: 'active',
      });
      expect((await api(app.url, `/api/v1/sinks/${sink.id}`, API_TOKEN, { method: 'DELETE' })).status).toBe(204);
      expect((await api(app.url, `/api/v1/sinks/${sink.id}`)).status).toBe(404);
    });

    it('answers 401 without the API token', async () => {
      expect((await api(app.url, '/api/v1/sinks', null)).status).toBe(401);
      expect(
        (
          await api(app.url, '/api/v1/sinks', null, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ kind: 'http', url: 'http://127.0.0.1:1/x' }),
          })
        ).status,
      ).toBe(401);
      expect(await sqlQuery(app.database.url, 'SELECT id FROM sinks')).toEqual([]);
    });
  });

  it('delivers every change it follows, signed (verified by standardwebhooks), in seq order, until the target equals the newest state of each resource', async () => {
    const target = await receiver();
    const other = await insertChanges(app.database.url, plan('other-owner', 3, 1));
    const inserted = await insertChanges(app.database.url, plan('o1'));
    const sink = await createSink(target, { owner_ids: ['o1'], batch_size: 10 });
    expect(sink).toMatchObject({
      kind: 'http',
      url: target.url,
      state: 'active',
      batch_size: 10,
      timeout_ms: 15000,
      types: ['collection', 'product', 'trait', 'trait_option'],
      owner_ids: ['o1'],
    });
    expect(sink.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);

    await eventually(async () => expectConverged(target, newestByResource(inserted)), 20000, 100);
    const more = await insertChanges(app.database.url, plan('o1', 3, 1));
    await eventually(async () => expectConverged(target, newestByResource([...inserted, ...more])), 20000, 50);

    expect(target.received.every((batch) => batch.verified !== null && batch.answered === 204)).toBe(true);
    expect(target.received.every((batch) => batch.verified!.data.length <= 10)).toBe(true);
    const seqs = target.acknowledgedChanges.map((change) => change.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(target.received.map((batch) => batch.webhookId)).size).toBe(target.received.length);
    expect(target.acknowledgedChanges.every((change) => change.owner_id === 'o1')).toBe(true);
    expect(target.acknowledgedChanges.some((change) => other.some((o) => o.change_id === change.change_id))).toBe(
      false,
    );
    const deleted = target.catalogue.get('product/o1-1');
    expect(deleted).toMatchObject({ op: 'delete', resource: { deleted: true } });
    await eventually(async () => {
      const view = (await api(app.url, `/api/v1/sinks/${sink.id}`)).json.data;
      expect(view).toMatchObject({ state: 'active', lag: 0, last_error: null, attempts: 0, next_attempt_at: null });
      expect(view.last_success_at).not.toBeNull();
      expect(view.secret).toBeUndefined();
    });
    expect(await scrape(app.url, 'menu_sync_sink_deliveries_total', { sink: sink.id, outcome: 'ok' })).toBe(
      target.received.length,
    );
    expect(await scrape(app.url, 'menu_sync_sink_lag_changes', { sink: sink.id })).toBe(0);
  });

  it('carries what the projector makes of webhook events to the target, until its live products equal GET /api/v1/menu', async () => {
    const target = await receiver();
    const sink = await createSink(target, { owner_ids: ['501'], types: ['product'] });
    const events = [
      ...[1, 2, 3, 4, 5].map((n) =>
        webhookEvent({ eventType: 'product.created', subjectId: String(9000 + n), ownerId: '501' }),
      ),
      webhookEvent({
        eventType: 'product.updated',
        subjectId: '9002',
        ownerId: '501',
        attributes: { title: 'Renamed' },
      }),
      webhookEvent({ eventType: 'product.destroyed', subjectId: '9004', ownerId: '501' }),
      webhookEvent({ eventType: 'product.created', subjectId: '9999', ownerId: '777' }),
    ];
    for (const event of events) expect((await deliver(app.url, event)).status).toBe(202);

    await eventually(
      async () => {
        const menu = (await api(app.url, '/api/v1/menu?owner_id=501')).json;
        const live = [...target.catalogue.values()]
          .filter((change) => change.op === 'upsert')
          .map((change) => change.resource);
        expect(live.map((resource) => resource.id).sort()).toEqual(
          menu.products.map((product: Json) => product.id).sort(),
        );
        for (const product of menu.products) {
          const { traits: _traits, ...resource } = product;
          expect(target.catalogue.get(`product/${product.id}`).resource).toEqual(resource);
        }
        expect(target.catalogue.get('product/9004')).toMatchObject({ op: 'delete', resource: { deleted: true } });
      },
      20000,
      50,
    );
    expect(target.catalogue.get('product/9002').resource.attributes.title).toBe('Renamed');
    expect(target.catalogue.has('product/9999')).toBe(false);
    expect(target.received.every((batch) => batch.verified !== null)).toBe(true);
    await eventually(async () => expect((await api(app.url, `/api/v1/sinks/${sink.id}`)).json.data.lag).toBe(0));
  });

  it("retries through 500s, a timeout and Retry-After under the batch's webhook-id, then converges with nothing missing", async () => {
    const target = await receiver();
    target.script = [
      { status: 500 },
      { status: 502 },
      { hangMs: 2500 },
      { status: 503, headers: { 'retry-after': '2' } },
    ];
    const inserted = await insertChanges(app.database.url, plan('o2', 5, 2));
    const sink = await createSink(target, { owner_ids: ['o2'], batch_size: 4, timeout_ms: 1000 });

    await eventually(
      async () => {
        const view = (await api(app.url, `/api/v1/sinks/${sink.id}`)).json.data;
        expect(view).toMatchObject({ state: 'retrying', last_error: expect.stringMatching(/50\d|no answer/) });
        expect(view.attempts).toBeGreaterThan(0);
        expect(view.lag).toBe(inserted.length);
        expect(Date.parse(view.next_attempt_at)).toBeGreaterThan(0);
      },
      10000,
      20,
    );
    await eventually(async () => expectConverged(target, newestByResource(inserted)), 60000, 100);

    const firstBatch = target.received.slice(0, 5);
    expect(firstBatch.map((batch) => batch.answered)).toEqual([500, 502, 'hung', 503, 204]);
    expect(new Set(firstBatch.map((batch) => batch.webhookId)).size).toBe(1);
    expect(new Set(firstBatch.map((batch) => batch.body)).size).toBe(1);
    expect(firstBatch[4].at - firstBatch[3].at).toBeGreaterThanOrEqual(1900);
    const acknowledged = new Set(target.acknowledgedChanges.map((change) => change.change_id));
    for (const change of newestByResource(inserted).values()) expect(acknowledged.has(change.change_id)).toBe(true);
    expect(await scrape(app.url, 'menu_sync_sink_deliveries_total', { sink: sink.id, outcome: 'retry' })).toBe(4);
    await eventually(async () =>
      expect((await api(app.url, `/api/v1/sinks/${sink.id}`)).json.data).toMatchObject({
        state: 'active',
        attempts: 0,
        last_error: null,
        lag: 0,
      }),
    );
  });

  it('disables a sink whose target answers 410 and sends nothing more until PATCH {"state":"active"}', async () => {
    const target = await receiver();
    target.script = [{ status: 410 }];
    const inserted = await insertChanges(app.database.url, plan('o4', 3, 1));
    const sink = await createSink(target, { owner_ids: ['o4'] });

    await eventually(async () =>
      expect((await api(app.url, `/api/v1/sinks/${sink.id}`)).json.data).toMatchObject({
        state: 'disabled',
        last_error: expect.stringContaining('410'),
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(target.received).toHaveLength(1);
    expect(await scrape(app.url, 'menu_sync_sink_deliveries_total', { sink: sink.id, outcome: 'disabled' })).toBe(1);

    expect((await patch(app, `/api/v1/sinks/${sink.id}`, { state: 'active' })).status).toBe(200);
    await eventually(async () => expectConverged(target, newestByResource(inserted)), 10000, 50);
    expect(target.received[1].webhookId).toBe(target.received[0].webhookId);
  });

  it("keeps a sink on time while another sink's target hangs (isolation)", async () => {
    const dead = await receiver();
    dead.always = { hangMs: 30000 };
    const alive = await receiver();
    await createSink(dead, { owner_ids: ['o3'] });
    const first = await insertChanges(app.database.url, plan('o3', 4, 1));
    await eventually(async () => expect(dead.received.length).toBeGreaterThan(0), 10000, 20);
    await createSink(alive, { owner_ids: ['o3'] });
    const more = await insertChanges(app.database.url, plan('o3', 4, 1));

    // well within the hanging delivery's 15 s timeout
    await eventually(async () => expectConverged(alive, newestByResource([...first, ...more])), 5000, 20);
    expect(dead.received).toHaveLength(1);
  });

  it('replays from the start, or after a cursor', async () => {
    const target = await receiver();
    const inserted = await insertChanges(app.database.url, plan('o6', 4, 1));
    const sink = await createSink(target, { owner_ids: ['o6'] });
    await eventually(async () => expectConverged(target, newestByResource(inserted)), 10000, 50);
    const cursor = await eventually(async () => {
      const view = (await api(app.url, `/api/v1/sinks/${sink.id}`)).json.data;
      expect(view.lag).toBe(0);
      return view.cursor;
    });
    const later = await insertChanges(app.database.url, plan('o6', 2, 1));
    await eventually(async () => expectConverged(target, newestByResource([...inserted, ...later])), 10000, 50);

    target.catalogue.clear();
    const afterCursor = await post(app, `/api/v1/sinks/${sink.id}/replay`, { from: cursor });
    expect(afterCursor.status).toBe(200);
    expect(afterCursor.json.data.cursor).toBe(cursor);
    await eventually(async () => expectConverged(target, newestByResource(later)), 10000, 50);

    target.catalogue.clear();
    expect((await post(app, `/api/v1/sinks/${sink.id}/replay`, { from: 'start' })).status).toBe(200);
    await eventually(async () => expectConverged(target, newestByResource([...inserted, ...later])), 10000, 50);
  });

  it('signs with the new and the previous secret for 24 h after a rotation, showing the new one only in that answer', async () => {
    const target = await receiver();
    const sink = await createSink(target, { owner_ids: ['o5'] });
    const previous = target.secrets[0];
    const rotated = await post(app, `/api/v1/sinks/${sink.id}/rotate-secret`, {});
    expect(rotated.status).toBe(200);
    const fresh = rotated.json.data.secret;
    expect(fresh).toMatch(/^whsec_/);
    expect(fresh).not.toBe(previous);
    const expires = Date.parse(rotated.json.data.previous_secret_expires_at) - Date.now();
    expect(expires).toBeGreaterThan(23.9 * 3600_000);
    expect(expires).toBeLessThanOrEqual(24 * 3600_000);
    target.secrets = [fresh];

    await insertChanges(app.database.url, plan('o5', 2, 1));
    // A batch built while the rotation committed may carry the old signature alone: this receiver
    // (holding only the new secret) refuses it, and the retry carries both. Look at the accepted one.
    await eventually(
      async () => expect(target.received.some((received) => received.verified !== null)).toBe(true),
      10000,
      50,
    );
    const batch = target.received.find((received) => received.verified !== null)!;
    const headers = {
      'webhook-id': batch.webhookId,
      'webhook-timestamp': batch.timestamp,
      'webhook-signature': batch.signature,
    };
    expect(batch.signature.split(' ')).toHaveLength(2);
    expect(new Webhook(fresh).verify(batch.body, headers)).toEqual(JSON.parse(batch.body));
    expect(new Webhook(previous).verify(batch.body, headers)).toEqual(JSON.parse(batch.body));
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(batch.body, headers)).toThrow();
    expect((await api(app.url, `/api/v1/sinks/${sink.id}`)).json.data.secret).toBeUndefined();
    expect((await api(app.url, '/api/v1/sinks')).text).not.toContain('whsec_');
  });

  it('manages sinks with menu-sync sinks add|list|replay|remove, with exit codes 0, 1 and 2', async () => {
    const env = { ...app.process.env, LOG_LEVEL: 'warn' };
    const target = await receiver();
    const inserted = await insertChanges(app.database.url, plan('c1', 3, 1));

    const added = await runCli(
      [
        'sinks',
        'add',
        '--kind',
        'http',
        '--url',
        target.url,
        '--owner-ids',
        'c1',
        '--batch-size',
        '2',
        '--from',
        'start',
        '--json',
      ],
      env,
      undefined,
      120000,
    );
    expect(added.code).toBe(0);
    const sink = JSON.parse(added.stdout).data;
    expect(sink).toMatchObject({
      kind: 'http',
      url: target.url,
      owner_ids: ['c1'],
      batch_size: 2,
      secret: expect.stringMatching(/^whsec_/),
    });
    target.secrets = [sink.secret];
    await eventually(async () => expectConverged(target, newestByResource(inserted)), 10000, 50);

    const listed = await runCli(['sinks', 'list', '--json'], env, undefined, 120000);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout).data.find((s: Json) => s.id === sink.id)).toMatchObject({ state: 'active' });
    expect(listed.stdout).not.toContain('whsec_');

    target.catalogue.clear();
    const replayed = await runCli(['sinks', 'replay', sink.id], env, undefined, 120000);
    expect(replayed.code).toBe(0);
    await eventually(async () => expectConverged(target, newestByResource(inserted)), 10000, 50);

    const failures: Array<[string[], number]> = [
      [['sinks', 'add', '--kind', 'http', '--url', 'not a url'], 2],
      [['sinks', 'add', '--kind', 'nats'], 2],
      [['sinks', 'replay', sink.id, '--from', 'garbage!'], 2],
      [['sinks', 'remove', '00000000-0000-4000-8000-000000000000'], 1],
      [['sinks', 'frobnicate'], 2],
    ];
    const results = await Promise.all(failures.map(([args]) => runCli(args, env, undefined, 180000)));
    expect(results.map((result, index) => ({ args: failures[index][0], code: result.code }))).toEqual(
      failures.map(([args, code]) => ({ args, code })),
    );
    expect(
      (await api(app.url, '/api/v1/sinks')).json.data.filter((s: Json) => s.owner_ids?.includes('c1')),
    ).toHaveLength(1);

    const removed = await runCli(['sinks', 'remove', sink.id], env, undefined, 120000);
    expect(removed.code).toBe(0);
    expect((await api(app.url, `/api/v1/sinks/${sink.id}`)).status).toBe(404);
  }, 400000);

  it('keeps every secret out of the database in clear and out of the logs', async () => {
    const secrets = receivers.flatMap((r) => r.secrets);
    expect(secrets.length).toBeGreaterThan(3);
    const rows = await sqlQuery(app.database.url, 'SELECT * FROM sinks');
    const stored = rows
      .map(
        (row) =>
          JSON.stringify(row) +
          Object.values(row)
            .map((value) => (Buffer.isBuffer(value) ? value.toString('latin1') + value.toString('base64') : ''))
            .join(''),
      )
      .join('\n');
    for (const secret of secrets) {
      const key = secret.slice('whsec_'.length);
      expect(stored).not.toContain(key);
      expect(stored).not.toContain(Buffer.from(key, 'base64').toString('latin1'));
      expect(app.process.logs).not.toContain(key);
    }
    expect(rows.every((row) => Buffer.isBuffer(row.secret))).toBe(true);
  });
});

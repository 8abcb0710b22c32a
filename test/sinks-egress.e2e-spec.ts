import { insertChanges, sqlQuery } from './support/change-log-factory.js';
import { eventually } from './support/eventually.js';
import { Answer, api, API_TOKEN, RunningDaemon, scrape, startDaemon, sendJson } from './support/http.js';
import { SinkReceiver } from './support/sink-receiver.js';

type Json = any;

const post = (app: RunningDaemon, path: string, body: unknown) => sendJson(app, 'POST', path, body);
const patch = (app: RunningDaemon, path: string, body: unknown) => sendJson(app, 'PATCH', path, body);

/** Every spelling of a loopback address (or 0.0.0.0) the guard must see through, on `port`. */
const loopbackForms = (port: number) => [
  `http://127.0.0.1:${port}/hook`,
  `http://localhost:${port}/hook`,
  `http://[::1]:${port}/hook`,
  `http://[::ffff:127.0.0.1]:${port}/hook`,
  `http://0.0.0.0:${port}/hook`,
  `http://127.1:${port}/hook`,
  `http://2130706433:${port}/hook`,
];

function expectRefused(answer: Answer): void {
  expect(answer.status).toBe(422);
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(answer.json).toMatchObject({
    status: 422,
    field: 'url',
    detail: expect.stringContaining('SINK_ALLOWED_NETWORKS'),
  });
}

describe('the egress guard of sinks (docs/reference.md §12)', () => {
  let closed: RunningDaemon;
  let open: RunningDaemon;
  const receivers: SinkReceiver[] = [];
  const receiver = async (host = '127.0.0.1') => {
    const started = await new SinkReceiver().start(0, host);
    receivers.push(started);
    return started;
  };

  beforeAll(async () => {
    [closed, open] = await Promise.all([
      startDaemon(),
      // Loopback as the guard reads it, 0.0.0.0 alone beside it; 127.0.0.2 stays refused.
      startDaemon({ SINK_ALLOWED_NETWORKS: '127.0.0.1/32,::1/128,0.0.0.0/32' }),
    ]);
  });

  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await Promise.all([closed?.close(), open?.close()]);
  });

  it('refuses every spelling of loopback with SINK_ALLOWED_NETWORKS empty, storing nothing', async () => {
    const target = await receiver();
    const port = Number(new URL(target.url).port);
    for (const url of loopbackForms(port)) {
      expectRefused(await post(closed, '/api/v1/sinks', { kind: 'http', url, from: 'now', owner_ids: ['nobody'] }));
    }
    expect((await api(closed.url, '/api/v1/sinks')).json.data).toEqual([]);
    expect(target.received).toEqual([]);
  });

  it('refuses the private, link-local, carrier-grade NAT, multicast, documentation and reserved ranges (creation only)', async () => {
    const hosts = [
      '10.0.0.1',
      '172.16.0.1',
      '192.168.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '224.0.0.1',
      '192.0.2.1',
      '198.51.100.1',
      '203.0.113.1',
      '198.18.0.1',
      '240.0.0.1',
      '255.255.255.255',
      '[fc00::1]',
      '[fe80::1]',
      '[ff02::1]',
      '[2001:db8::1]',
      '[::ffff:10.0.0.1]',
      '[::ffff:169.254.169.254]',
      '[64:ff9b::a9fe:a9fe]',
      '[::]',
    ];
    for (const host of hosts) {
      // Could deliver nothing even if accepted: no change yet, and no owner "nobody".
      const answer = await post(closed, '/api/v1/sinks', {
        kind: 'http',
        url: `http://${host}/hook`,
        from: 'now',
        owner_ids: ['nobody'],
      });
      if (answer.status === 201) {
        await api(closed.url, `/api/v1/sinks/${answer.json.data.id}`, API_TOKEN, { method: 'DELETE' });
      }
      expectRefused(answer);
    }
    expect((await api(closed.url, '/api/v1/sinks')).json.data).toEqual([]);
  });

  it('allows what SINK_ALLOWED_NETWORKS names, and delivers there', async () => {
    const v4 = await receiver();
    const v6 = await receiver('::1');
    const port4 = Number(new URL(v4.url).port);
    const port6 = Number(new URL(v6.url).port);
    const sinks: Array<{ sink: Json; target: SinkReceiver }> = [];
    for (const url of loopbackForms(port4)) {
      const target = url.includes('[::1]') ? v6 : v4;
      const answer = await post(open, '/api/v1/sinks', {
        kind: 'http',
        url: target === v6 ? url.replace(`:${port4}`, `:${port6}`) : url,
        from: 'now',
        owner_ids: ['allowed'],
      });
      expect(answer.status).toBe(201);
      target.secrets.push(answer.json.data.secret);
      sinks.push({ sink: answer.json.data, target });
    }
    const [change] = await insertChanges(open.database.url, [{ type: 'product', id: 'allowed-1', ownerId: 'allowed' }]);
    await eventually(
      async () => {
        expect(v4.acknowledgedChanges.map((c) => c.change_id)).toEqual(Array(6).fill(change.change_id));
        expect(v6.acknowledgedChanges.map((c) => c.change_id)).toEqual([change.change_id]);
      },
      30000,
      100,
    );
    for (const { sink } of sinks) await api(open.url, `/api/v1/sinks/${sink.id}`, API_TOKEN, { method: 'DELETE' });
  });

  it('refuses on PATCH a url that leaves the allowed networks, changing nothing', async () => {
    const target = await receiver();
    const created = await post(open, '/api/v1/sinks', {
      kind: 'http',
      url: target.url,
      from: 'now',
      owner_ids: ['nobody'],
    });
    expect(created.status).toBe(201);
    const id = created.json.data.id;
    // The sink can deliver nothing (from now, an owner with no changes); were a PATCH wrongly
    // accepted, the failed expectation ends the loop and the sink is deleted at once.
    try {
      for (const url of ['http://127.0.0.2:9/hook', 'http://10.1.2.3/hook', 'http://[fd00::1]/hook']) {
        expectRefused(await patch(open, `/api/v1/sinks/${id}`, { url }));
      }
      expect((await api(open.url, `/api/v1/sinks/${id}`)).json.data.url).toBe(target.url);
    } finally {
      await api(open.url, `/api/v1/sinks/${id}`, API_TOKEN, { method: 'DELETE' });
    }
  });

  it('checks again at every connection: an address refused then fails the attempt, and counts', async () => {
    const target = await receiver();
    const created = await post(open, '/api/v1/sinks', {
      kind: 'http',
      url: target.url,
      from: 'now',
      owner_ids: ['later'],
    });
    expect(created.status).toBe(201);
    const id = created.json.data.id;
    // What a name that resolves elsewhere later amounts to: the stored target is now a refused address.
    const refusedUrl = target.url.replace('127.0.0.1', '127.0.0.2');
    // Past the dispatcher's next look (every 500 ms), which finds the sink's settings changed and
    // has its worker read it again.
    await sqlQuery(open.database.url, `UPDATE sinks SET url = $2 WHERE id = $1`, [id, refusedUrl]);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await insertChanges(open.database.url, [{ type: 'product', id: 'later-1', ownerId: 'later' }]);
    await eventually(
      async () => {
        const view = (await api(open.url, `/api/v1/sinks/${id}`)).json.data;
        expect(view.state).toBe('retrying');
        expect(view.last_error).toBe(
          'the egress guard refused 127.0.0.2 (loopback): add its network to SINK_ALLOWED_NETWORKS to allow it',
        );
      },
      20000,
      100,
    );
    expect(await scrape(open.url, 'menu_sync_sink_egress_refused_total', { sink: id })).toBeGreaterThanOrEqual(1);
    expect(target.received).toEqual([]);
    await api(open.url, `/api/v1/sinks/${id}`, API_TOKEN, { method: 'DELETE' });
  });

  it('never follows a redirect: a 302 is a failed attempt, and its Location gets nothing', async () => {
    const [first, second] = [await receiver(), await receiver()];
    first.always = { status: 302, headers: { location: second.url } };
    const created = await post(open, '/api/v1/sinks', {
      kind: 'http',
      url: first.url,
      from: 'now',
      owner_ids: ['redirected'],
    });
    expect(created.status).toBe(201);
    const id = created.json.data.id;
    first.secrets = [created.json.data.secret];
    second.secrets = [created.json.data.secret];
    await insertChanges(open.database.url, [{ type: 'product', id: 'redirected-1', ownerId: 'redirected' }]);
    await eventually(
      async () => {
        const view = (await api(open.url, `/api/v1/sinks/${id}`)).json.data;
        expect(view).toMatchObject({
          state: 'retrying',
          last_error: 'the target answered 302, a redirect, which sinks do not follow',
        });
      },
      20000,
      100,
    );
    expect(first.received.length).toBeGreaterThanOrEqual(1);
    expect(first.received.every((batch) => batch.answered === 302)).toBe(true);
    expect(second.received).toEqual([]);
    expect(
      await scrape(open.url, 'menu_sync_sink_deliveries_total', { sink: id, outcome: 'retry' }),
    ).toBeGreaterThanOrEqual(1);
    await api(open.url, `/api/v1/sinks/${id}`, API_TOKEN, { method: 'DELETE' });
  });
});

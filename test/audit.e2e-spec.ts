import { randomBytes } from 'node:crypto';
import { userInfo } from 'node:os';
import type { RunningEmulator } from '../src/emulator/emulator.factory.js';
import { bootEmulator } from './emulator/emulator-client.js';
import { sqlQuery } from './support/change-log-factory.js';
import { describeRun, runCli } from './support/cli.js';
import { connect, startDaemonOn } from './support/connect.js';
import { eventually } from './support/eventually.js';
import {
  api,
  API_TOKEN,
  expectFieldProblem,
  LOOPBACK_NETWORKS,
  RunningDaemon,
  sendJson,
  startDaemon,
} from './support/http.js';
import { SinkReceiver } from './support/sink-receiver.js';

type Json = any;

const READ_TOKEN = `test-read-token-${randomBytes(16).toString('hex')}`;
/** How the API names the first API_TOKENS entry (src/common/api-token.guard.ts): by position, never its secret. */
const ADMIN = { id: 'api_tokens:1', name: 'API_TOKENS entry 1' };
const USER = userInfo().username;
const CLI = { id: `cli:${USER}`, name: `menu-sync CLI (${USER})` };

const audit = (app: RunningDaemon, query = '', token: string | null = API_TOKEN) =>
  api(app.url, `/api/v1/audit${query}`, token);

describe('the audit log (docs/reference.md §12)', () => {
  let emulator: RunningEmulator;
  let app: RunningDaemon;
  let receiver: SinkReceiver;
  /** The entries seen so far, newest first: each test adds its own on top. */
  let seen: Json[] = [];

  beforeAll(async () => {
    receiver = await new SinkReceiver().start();
    emulator = await bootEmulator({ demoData: true });
    app = await startDaemonOn(emulator, {
      API_TOKENS: `${API_TOKEN},read:${READ_TOKEN}`,
      SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
    });
  }, 120_000);

  afterAll(async () => {
    await receiver?.close();
    await app?.close();
    await emulator?.close();
  });

  it('records a connection made by the connect flow, named by the token that started it (the callback carries none)', async () => {
    expect((await audit(app)).json).toEqual({ data: [], next_cursor: null });
    const connection = await connect(app.url);
    const { json } = await audit(app);
    expect(json).toEqual({
      data: [
        {
          at: expect.any(String),
          token: ADMIN,
          action: 'connection.created',
          target: String(connection.id),
          remote_address: '127.0.0.1',
        },
      ],
      next_cursor: null,
    });
    seen = json.data;
  });

  it('records each admin write of the sinks API, newest first, none for a read, and pages with limit and before', async () => {
    const created = await sendJson(app, 'POST', '/api/v1/sinks', { kind: 'http', url: receiver.url, from: 'now' });
    expect(created.status).toBe(201);
    const id = created.json.data.id;
    expect((await sendJson(app, 'PATCH', `/api/v1/sinks/${id}`, { batch_size: 10 })).status).toBe(200);
    expect((await sendJson(app, 'POST', `/api/v1/sinks/${id}/replay`, { from: 'start' })).status).toBe(200);
    expect((await api(app.url, `/api/v1/sinks/${id}/rotate-secret`, API_TOKEN, { method: 'POST' })).status).toBe(200);
    // Reads, and writes that change nothing (refused or naming no sink), record nothing.
    for (const path of [
      `/api/v1/sinks/${id}`,
      '/api/v1/sinks',
      '/api/v1/sinks/summary',
      `/api/v1/sinks/${id}/attempts`,
    ])
      expect((await api(app.url, path)).status).toBe(200);
    expect((await sendJson(app, 'PATCH', `/api/v1/sinks/${id}`, { batch_size: 0 })).status).toBe(400);
    expect((await api(app.url, `/api/v1/sinks/${id}`, READ_TOKEN, { method: 'DELETE' })).status).toBe(403);
    const unknown = '00000000-0000-4000-8000-000000000000';
    expect((await api(app.url, `/api/v1/sinks/${unknown}`, API_TOKEN, { method: 'DELETE' })).status).toBe(404);
    expect((await api(app.url, `/api/v1/sinks/${id}`, API_TOKEN, { method: 'DELETE' })).status).toBe(204);

    const entry = (action: string) => ({
      at: expect.any(String),
      token: ADMIN,
      action,
      target: id,
      remote_address: '127.0.0.1',
    });
    const all = await audit(app);
    expect(all.status).toBe(200);
    expect(all.json).toEqual({
      data: [
        entry('sink.deleted'),
        entry('sink.secret_rotated'),
        entry('sink.replayed'),
        entry('sink.updated'),
        entry('sink.created'),
        ...seen,
      ],
      next_cursor: null,
    });
    const times = all.json.data.map((row: Json) => Date.parse(row.at));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    // What detail holds: ids, field names and outcomes, never the URL or the secret.
    const details = await sqlQuery(app.database.url, `SELECT action, detail FROM audit_log ORDER BY id`);
    expect(details).toEqual([
      { action: 'connection.created', detail: null },
      { action: 'sink.created', detail: { kind: 'http' } },
      { action: 'sink.updated', detail: { fields: ['batch_size'] } },
      { action: 'sink.replayed', detail: { from: 'start' } },
      { action: 'sink.secret_rotated', detail: null },
      { action: 'sink.deleted', detail: null },
    ]);
    expect(JSON.stringify(await sqlQuery(app.database.url, `SELECT * FROM audit_log`))).not.toMatch(
      /whsec_|\/hook|test-api-token/,
    );

    const first = await audit(app, '?limit=2');
    expect(first.json).toEqual({ data: all.json.data.slice(0, 2), next_cursor: expect.any(String) });
    const second = await audit(app, `?limit=2&before=${first.json.next_cursor}`);
    expect(second.json).toEqual({ data: all.json.data.slice(2, 4), next_cursor: expect.any(String) });
    const third = await audit(app, `?before=${second.json.next_cursor}&limit=2`);
    expect(third.json).toEqual({ data: all.json.data.slice(4, 6), next_cursor: null });
    expect((await audit(app, `?limit=1000&before=${first.json.next_cursor}`)).json).toEqual({
      data: all.json.data.slice(2),
      next_cursor: null,
    });
    seen = all.json.data;
    expect((await audit(app)).json.data).toEqual(seen);
  });

  it('refuses a read token (403) and a malformed query (400 naming the field)', async () => {
    const refused = await audit(app, '', READ_TOKEN);
    expect(refused.status).toBe(403);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect((await audit(app, '?limit=abc', READ_TOKEN)).status).toBe(403);
    expect((await audit(app, '', null)).status).toBe(401);
    for (const query of ['?limit=0', '?limit=1001', '?limit=abc', '?limit=2.5'])
      expectFieldProblem(await audit(app, query), 400, 'limit');
    for (const query of [
      '?before=abc',
      '?before=',
      `?before=${Buffer.from('e0').toString('base64url')}`,
      '?before=%2F',
    ])
      expectFieldProblem(await audit(app, query), 400, 'before');
    expectFieldProblem(await audit(app, '?after=x'), 400, 'after');
    expect((await audit(app)).json.data).toEqual(seen);
  });

  it("records the CLI's replay, reconcile and sink writes as cli:<user>", async () => {
    const env = { ...app.process.env, LOG_LEVEL: 'warn' };
    const replayed = await runCli(['replay', '--projection', 'menu'], env, app.process.cwd, 180_000);
    expect(replayed.code).toBe(0);
    const reconciled = await runCli(['reconcile'], env, app.process.cwd, 180_000);
    expect({ code: reconciled.code, run: describeRun(reconciled) }).toMatchObject({ code: 0 });
    const run = JSON.parse(/^\{\n[\s\S]*?^\}$/m.exec(reconciled.stdout)![0]).data;
    const added = await runCli(
      ['sinks', 'add', '--url', receiver.url, '--from', 'now', '--json'],
      env,
      app.process.cwd,
    );
    expect(added.code).toBe(0);
    const sink = JSON.parse(added.stdout).data;

    const entry = (action: string, target: string) => ({
      at: expect.any(String),
      token: CLI,
      action,
      target,
      remote_address: null,
    });
    const { json } = await audit(app);
    expect(json.data).toEqual([
      entry('sink.created', sink.id),
      entry('reconcile.ran', String(run.id)),
      entry('projection.replayed', 'menu'),
      ...seen,
    ]);
    const [reconcileDetail] = await sqlQuery(
      app.database.url,
      `SELECT detail FROM audit_log WHERE action = 'reconcile.ran'`,
    );
    expect(reconcileDetail.detail).toEqual({
      outcome: run.outcome,
      events_appended: run.stores.reduce((sum: number, store: Json) => sum + store.events_appended, 0),
    });
  }, 400_000);
});

describe('AUDIT_RETENTION', () => {
  let app: RunningDaemon;

  beforeAll(async () => {
    app = await startDaemon({ AUDIT_RETENTION: '4s', SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS });
  });

  afterAll(async () => {
    await app?.close();
  });

  it('deletes entries older than the retention, and shows none of them meanwhile', async () => {
    await sqlQuery(
      app.database.url,
      `INSERT INTO audit_log (at, actor_id, actor_name, action, target)
       VALUES (now() - interval '1 hour', 'api_tokens:1', 'API_TOKENS entry 1', 'sink.deleted', 'old')`,
    );
    // Refused (no NATS_URL): nothing changed, nothing recorded.
    expect((await sendJson(app, 'POST', '/api/v1/sinks', { kind: 'nats', from: 'now' })).status).toBe(422);
    const created = await sendJson(app, 'POST', '/api/v1/sinks', { kind: 'http', url: 'http://127.0.0.1:9/hook' });
    expect(created.status).toBe(201);
    const fresh = {
      at: expect.any(String),
      token: ADMIN,
      action: 'sink.created',
      target: created.json.data.id,
      remote_address: '127.0.0.1',
    };
    expect((await audit(app)).json).toEqual({ data: [fresh], next_cursor: null });
    await eventually(
      async () =>
        expect(await sqlQuery(app.database.url, `SELECT target FROM audit_log`)).toEqual([
          { target: created.json.data.id },
        ]),
      5000,
      100,
    );
    await eventually(
      async () => {
        expect(await sqlQuery(app.database.url, `SELECT target FROM audit_log`)).toEqual([]);
        expect((await audit(app)).json).toEqual({ data: [], next_cursor: null });
      },
      15000,
      200,
    );
  }, 60_000);
});

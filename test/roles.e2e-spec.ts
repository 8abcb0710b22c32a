import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DaemonProcess } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import {
  Answer,
  api,
  deliver,
  LOOPBACK_NETWORKS,
  metricValue,
  RunningDaemon,
  sendJson,
  startDaemon,
} from './support/http.js';
import { at, menuEvent, product } from './support/menu-events.js';
import { SinkReceiver } from './support/sink-receiver.js';

/**
 * docs/reference.md §1 (Roles): ROLES splits the daemon's work across processes on one database.
 * A process answers the routes of a role it lacks with 503 and Retry-After (a balancer routed there
 * by mistake retries), never 404; /health/ready and /metrics tell its roles; a bad ROLES stops the
 * start with exit code 2, naming ROLES.
 */

const YEARLY = '0 0 1 1 *';

function expectRoleRefused(answer: Answer, role: string): void {
  expect({
    status: answer.status,
    retryAfter: answer.headers.get('retry-after'),
    type: answer.headers.get('content-type'),
    role: answer.json?.role,
    problem: answer.json?.type,
  }).toEqual({
    status: 503,
    retryAfter: '5',
    type: expect.stringMatching(/^application\/problem\+json/),
    role,
    problem: 'urn:menu-sync:problem:role-not-held',
  });
}

async function metrics(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

const roleGauges = (exposition: string) =>
  Object.fromEntries(
    ['ingress', 'api', 'projector', 'sinks', 'reconcile', 'console'].map((role) => [
      role,
      metricValue(exposition, 'menu_sync_role', { role }),
    ]),
  );

describe('ROLES: one database, processes of different roles (docs/reference.md §1)', () => {
  let reader: RunningDaemon;
  let intake: DaemonProcess;
  let dir: string;

  beforeAll(async () => {
    reader = await startDaemon({
      ROLES: 'api,projector',
      RECONCILE_CRON: YEARLY,
      SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
    });
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-roles-'));
    const { PORT: _port, DATA_DIR: _dataDir, ...env } = reader.process.env;
    intake = await DaemonProcess.start({
      cwd: dir,
      env: { ...env, DATA_DIR: dir, ROLES: 'ingress, sinks,reconcile' },
    });
  }, 180_000);

  afterAll(async () => {
    intake?.kill('SIGTERM');
    await intake?.waitForExit(15000);
    await reader?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('a process without ingress answers webhooks with 503 and Retry-After, one with it takes them; the projector of the other applies them', async () => {
    const event = menuEvent('created', product('7001'), { at: at(1), ownerId: 'roles' });
    expectRoleRefused(await deliver(reader.url, event), 'ingress');
    const accepted = await deliver(intake.url, event);
    expect(accepted.status).toBe(202);
    const shown = await eventually(
      async () => {
        const answer = await api(reader.url, '/api/v1/products/7001');
        expect(answer.status).toBe(200);
        return answer.json;
      },
      15000,
      50,
    );
    expect({ id: shown.id, owner: shown.owner_id }).toEqual({ id: '7001', owner: 'roles' });
  });

  it('without api, /api/v1 and the connect flow answer 503; without console, / and /console do; health, metrics and the API docs are served everywhere', async () => {
    expectRoleRefused(await api(intake.url, '/api/v1/products'), 'api');
    expectRoleRefused(await api(intake.url, '/api/v1/sinks', undefined, { method: 'POST', body: '{}' }), 'api');
    expectRoleRefused(await api(intake.url, '/auth/connect', null), 'api');
    for (const daemon of [reader.url, intake.url]) {
      expectRoleRefused(await api(daemon, '/console/', null), 'console');
      expectRoleRefused(await api(daemon, '/', null), 'console');
      expect((await api(daemon, '/api/docs-json', null)).status).toBe(200);
      expect((await api(daemon, '/health/live', null)).status).toBe(200);
    }
  });

  it('/health/ready and /metrics tell the roles; readiness waits for no loop of a role the process lacks', async () => {
    const ready = await Promise.all([reader.url, intake.url].map((url) => api(url, '/health/ready', null)));
    expect(
      ready.map((answer) => ({ status: answer.status, roles: answer.json.roles, ok: answer.json.status })),
    ).toEqual([
      { status: 200, roles: ['api', 'projector'], ok: 'ok' },
      { status: 200, roles: ['ingress', 'sinks', 'reconcile'], ok: 'ok' },
    ]);
    expect(roleGauges(await metrics(reader.url))).toEqual({
      ingress: 0,
      api: 1,
      projector: 1,
      sinks: 0,
      reconcile: 0,
      console: 0,
    });
    expect(roleGauges(await metrics(intake.url))).toEqual({
      ingress: 1,
      api: 0,
      projector: 0,
      sinks: 1,
      reconcile: 1,
      console: 0,
    });
    // The loops of the roles held run; the others never start.
    await eventually(
      async () => expect(metricValue(await metrics(intake.url), 'menu_sync_sink_dispatchers')).toBe(1),
      10000,
      50,
    );
    expect(metricValue(await metrics(reader.url), 'menu_sync_sink_dispatchers')).toBe(0);
    const projections = (await api(reader.url, '/api/v1/projections')).json.data;
    expect(projections.map((p: { state: string }) => p.state)).toEqual(['running', 'running']);
    expect(intake.logs).toContain('reconcile scheduled');
    expect(reader.process.logs).not.toContain('reconcile scheduled');
    expect(reader.process.logs).not.toContain('this daemon is the active sink dispatcher');
  });

  it("a sink changed through another process's API is read again by the dispatcher holding it: a replay and the next change go by the new settings", async () => {
    const [first, second] = await Promise.all([new SinkReceiver().start(), new SinkReceiver().start()]);
    const created = await sendJson(reader, 'POST', '/api/v1/sinks', {
      kind: 'http',
      url: first.url,
      from: 'now',
      owner_ids: ['moved'],
    });
    expect(created.status).toBe(201);
    const sink = created.json.data;
    first.secrets = second.secrets = [sink.secret];
    const ids = (receiver: SinkReceiver) => receiver.acknowledgedChanges.map((change) => change.id);
    try {
      const before = menuEvent('created', product('7101'), { at: at(2), ownerId: 'moved' });
      expect((await deliver(intake.url, before)).status).toBe(202);
      await eventually(async () => expect(ids(first)).toEqual(['7101']), 15000, 50);
      const patched = await sendJson(reader, 'PATCH', `/api/v1/sinks/${sink.id}`, { url: second.url });
      expect(patched.status).toBe(200);
      const replayed = await sendJson(reader, 'POST', `/api/v1/sinks/${sink.id}/replay`, { from: 'start' });
      expect(replayed.status).toBe(200);
      // No new change wakes the worker: the intake process hears of the sink's change only through
      // the database, at its dispatcher's next look (every 500 ms; an idle worker's own re-read
      // comes only after 10 s). The replay goes to the new URL.
      await eventually(async () => expect(ids(second)).toEqual(['7101']), 5000, 50);
      const after = menuEvent('created', product('7102'), { at: at(3), ownerId: 'moved' });
      expect((await deliver(intake.url, after)).status).toBe(202);
      await eventually(async () => expect(ids(second)).toEqual(['7101', '7102']), 15000, 50);
      expect(ids(first)).toEqual(['7101']);
    } finally {
      await api(reader.url, `/api/v1/sinks/${sink.id}`, undefined, { method: 'DELETE' });
      await Promise.all([first.close(), second.close()]);
    }
  });

  it('an unknown role stops the start with exit code 2, naming ROLES', async () => {
    const bad = await DaemonProcess.spawn({ cwd: dir, env: { ...intake.env, ROLES: 'ingress,worker' } });
    const exit = await bad.waitForExit(20000);
    expect({ exit, stderr: bad.stderr }).toEqual({
      exit: { code: 2, signal: null },
      stderr: expect.stringContaining(
        'ROLES: ROLES must list roles among ingress, api, projector, sinks, reconcile, console',
      ),
    });
  });
});

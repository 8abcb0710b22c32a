import { randomBytes } from 'node:crypto';
import { copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { ARTIFACTS_DIR, Browser, launchBrowser } from './support/browser.js';
import { sqlQuery } from './support/change-log-factory.js';
import { ROOT_DIR } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import {
  api,
  API_TOKEN,
  deliver,
  expectFieldProblem,
  LOOPBACK_NETWORKS,
  RunningDaemon,
  sendJson,
  startDaemon,
} from './support/http.js';
import { SinkReceiver } from './support/sink-receiver.js';
import { webhookEvent } from './support/webhook-events.js';

type Json = any;

const READ_TOKEN = `test-read-token-${randomBytes(16).toString('hex')}`;
const MINUTE_MS = 60_000;
const EVENTS = 5;
const empty = (minute: string) => ({ minute, events: 0, changes: 0, deliveries: {}, failures: {} });
const minuteOf = (at: number) => new Date(at - (at % MINUTE_MS)).toISOString();

describe('the activity history, and paging the events and the quarantine newest first (docs/reference.md §5, §11)', () => {
  let app: RunningDaemon;
  let receiver: SinkReceiver;
  let sinkId: string;
  let loadMinute: string;
  let scoped: string;

  beforeAll(async () => {
    receiver = await new SinkReceiver().start();
    app = await startDaemon({
      API_TOKENS: `${API_TOKEN},read:${READ_TOKEN}`,
      SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
    });
    const made = await sendJson(app, 'POST', '/api/v1/tokens', { name: 'one store', role: 'read', owner_ids: ['42'] });
    expect(made.status).toBe(201);
    scoped = made.json.token;
  }, 60_000);

  afterAll(async () => {
    await receiver?.close();
    await app?.close();
  });

  it('answers exact counts per minute after a known load: events, changes, deliveries and failures by kind', async () => {
    // The whole load falls in one minute: it starts early in one.
    while (Date.now() % MINUTE_MS > 30_000) await new Promise((resolve) => setTimeout(resolve, 500));
    const started = Date.now();
    loadMinute = minuteOf(started);
    const created = await sendJson(app, 'POST', '/api/v1/sinks', { kind: 'http', url: receiver.url, from: 'now' });
    expect(created.status).toBe(201);
    sinkId = created.json.data.id;
    receiver.secrets = [created.json.data.secret];
    receiver.script = [{ status: 500 }];
    for (let i = 0; i < EVENTS; i += 1)
      expect((await deliver(app.url, webhookEvent({ subjectId: String(500 + i) }))).status).toBe(202);
    for (const body of ['{"data":1}', '{"data":2}']) expect((await deliver(app.url, body)).status).toBe(400);
    await eventually(async () => expect(receiver.acknowledgedChanges).toHaveLength(EVENTS), 20_000, 200);

    const since = new Date(started - MINUTE_MS).toISOString();
    const until = new Date(started + MINUTE_MS).toISOString();
    const expected = {
      since: minuteOf(started - MINUTE_MS),
      until,
      minutes: [
        empty(minuteOf(started - MINUTE_MS)),
        { minute: loadMinute, events: 5, changes: 5, deliveries: { http: 5 }, failures: { http: 1, webhook: 2 } },
        empty(minuteOf(started + MINUTE_MS)),
      ],
    };
    // Counts reach PostgreSQL within a flush (2 s).
    await eventually(
      async () => expect((await api(app.url, `/api/v1/activity?since=${since}&until=${until}`)).json).toEqual(expected),
      10_000,
      250,
    );
    expect(Date.now() - started).toBeLessThan(MINUTE_MS - 30_000);
    const read = await api(app.url, `/api/v1/activity?since=${since}&until=${until}`, READ_TOKEN);
    expect(read.status).toBe(200);
    expect(read.json).toEqual(expected);

    const day = await api(app.url, '/api/v1/activity', READ_TOKEN);
    expect(day.json.minutes).toHaveLength(24 * 60 + 1);
    expect(day.json.minutes.filter((minute: Json) => minute.events > 0)).toEqual([expected.minutes[1]]);
  }, 90_000);

  it('refuses a token scoped to owners, and a bad or too long span, naming the field', async () => {
    const refused = await api(app.url, '/api/v1/activity', scoped);
    expect(refused.status).toBe(403);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expectFieldProblem(await api(app.url, '/api/v1/activity?since=yesterday'), 400, 'since');
    expectFieldProblem(
      await api(app.url, '/api/v1/activity?since=2026-01-01T00:00:00Z&until=2026-01-09T00:00:00Z'),
      400,
      'since',
    );
    expectFieldProblem(
      await api(app.url, '/api/v1/activity?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z'),
      400,
      'since',
    );
  });

  it('pages the events newest first with before=, after= oldest first as before', async () => {
    const positions = (answer: Json) => answer.json.data.map((entry: Json) => entry.position);
    const oldest = await api(app.url, '/api/v1/events?limit=2');
    expect(positions(oldest)).toEqual([1, 2]);
    expect(oldest.json.next_cursor).toBe('2');
    const first = await api(app.url, '/api/v1/events?limit=2&before=latest', READ_TOKEN);
    expect([positions(first), first.json.next_cursor]).toEqual([[5, 4], '4']);
    const second = await api(app.url, `/api/v1/events?limit=2&before=${first.json.next_cursor}`);
    expect([positions(second), second.json.next_cursor]).toEqual([[3, 2], '2']);
    const last = await api(app.url, `/api/v1/events?limit=2&before=${second.json.next_cursor}`);
    expect([positions(last), last.json.next_cursor]).toEqual([[1], null]);
    const filtered = await api(app.url, '/api/v1/events?before=latest&subject_id=503');
    expect(positions(filtered)).toEqual([4]);
    expect(first.json.data[0]).toEqual((await api(app.url, '/api/v1/events?after=4')).json.data[0]);
    expectFieldProblem(await api(app.url, '/api/v1/events?before=0'), 400, 'before');
    expectFieldProblem(await api(app.url, '/api/v1/events?before=newest'), 400, 'before');
  });

  it('pages the quarantine newest first with before=, within the owner scope', async () => {
    const all = await api(app.url, '/api/v1/quarantine');
    const ids = all.json.data.map((entry: Json) => entry.id);
    expect(ids).toHaveLength(2);
    expect(ids[0]).toBeLessThan(ids[1]);
    const first = await api(app.url, '/api/v1/quarantine?limit=1&before=latest');
    expect([first.json.data.map((entry: Json) => entry.body), first.json.next_cursor]).toEqual([
      ['{"data":2}'],
      String(ids[1]),
    ]);
    const second = await api(app.url, `/api/v1/quarantine?limit=1&before=${ids[1]}`);
    expect([second.json.data.map((entry: Json) => entry.body), second.json.next_cursor]).toEqual([
      ['{"data":1}'],
      String(ids[0]),
    ]);
    expect((await api(app.url, `/api/v1/quarantine?limit=1&before=${ids[0]}`)).json).toEqual({
      data: [],
      next_cursor: null,
    });
    // These bodies name no owner: a token scoped to owners sees none of them.
    expect((await api(app.url, '/api/v1/quarantine?before=latest', scoped)).json).toEqual({
      data: [],
      next_cursor: null,
    });
  });

  it('pauses, resumes and removes a sink through the calls the console makes, for admin tokens only', async () => {
    expect((await api(app.url, '/api/v1/whoami')).json).toEqual({ role: 'admin', owner_ids: null });
    expect((await api(app.url, '/api/v1/whoami', READ_TOKEN)).json).toEqual({ role: 'read', owner_ids: null });
    const patch = (state: string, token = API_TOKEN) =>
      api(app.url, `/api/v1/sinks/${sinkId}`, token, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ state }),
      });
    expect((await patch('disabled', READ_TOKEN)).status).toBe(403);
    const paused = await patch('disabled');
    expect([paused.status, paused.json.data.state]).toEqual([200, 'disabled']);
    // Paused: a new event is published but not delivered.
    expect((await deliver(app.url, webhookEvent({ subjectId: '600' }))).status).toBe(202);
    await eventually(async () => expect((await api(app.url, '/api/v1/products/600')).status).toBe(200), 10_000, 100);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(receiver.acknowledgedChanges).toHaveLength(EVENTS);
    const resumed = await patch('active');
    expect([resumed.status, resumed.json.data.state]).toEqual([200, 'active']);
    await eventually(async () => expect(receiver.acknowledgedChanges).toHaveLength(EVENTS + 1), 10_000, 100);
    const remove = (token: string) => api(app.url, `/api/v1/sinks/${sinkId}`, token, { method: 'DELETE' });
    expect((await remove(READ_TOKEN)).status).toBe(403);
    expect((await remove(API_TOKEN)).status).toBe(204);
    expect((await api(app.url, `/api/v1/sinks/${sinkId}`)).status).toBe(404);
  }, 60_000);
});

describe('ACTIVITY_RETENTION', () => {
  let app: RunningDaemon;

  beforeAll(async () => {
    app = await startDaemon({ ACTIVITY_RETENTION: '20s' });
  }, 60_000);

  afterAll(async () => {
    await app?.close();
  });

  it('deletes the minutes older than the retention, in the background, and keeps the others', async () => {
    await sqlQuery(
      app.database.url,
      `INSERT INTO activity_minutes (minute, kind, key, count) VALUES
         (date_trunc('minute', now()) - interval '1 hour', 'events', 'webhook', 3),
         (date_trunc('minute', now()) + interval '1 minute', 'events', 'webhook', 4)`,
    );
    // The job runs every quarter of the retention (5 s).
    await eventually(
      async () =>
        expect(
          await sqlQuery(app.database.url, `SELECT count::int AS count FROM activity_minutes ORDER BY minute`),
        ).toEqual([{ count: 4 }]),
      15_000,
      250,
    );
  }, 30_000);
});

describe('the console: the activity history charted, events paged, sink buttons for admin tokens only', () => {
  let app: RunningDaemon;
  let receiver: SinkReceiver;
  let browser: Browser;
  let page: Page;
  // The screenshots the docs show (docs/screenshots/activity-*.png), refreshed by a run of this file.
  const shot = async (name: string) => {
    const file = path.join(ARTIFACTS_DIR, `activity-${name}.png`);
    await page.screenshot({ path: file, fullPage: true });
    await mkdir(path.join(ROOT_DIR, 'docs', 'screenshots'), { recursive: true });
    await copyFile(file, path.join(ROOT_DIR, 'docs', 'screenshots', `activity-${name}.png`));
  };

  beforeAll(async () => {
    receiver = await new SinkReceiver().start();
    app = await startDaemon({
      API_TOKENS: `${API_TOKEN},read:${READ_TOKEN}`,
      SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
    });
    const created = await sendJson(app, 'POST', '/api/v1/sinks', { kind: 'http', url: receiver.url, from: 'now' });
    receiver.secrets = [created.json.data.secret];
    // An hour of history as an incident left it (rows as the counters write them), then a live load.
    await sqlQuery(
      app.database.url,
      `INSERT INTO activity_minutes (minute, kind, key, count)
       SELECT date_trunc('minute', now()) - make_interval(mins => m), k.kind, k.key,
              round(k.base * (1 + sin(m / 9.0)) + CASE WHEN m BETWEEN 20 AND 30 AND k.kind = 'failures' THEN 40 ELSE 0 END)
         FROM generate_series(3, 92) AS m,
              (VALUES ('events', 'webhook', 30), ('changes', '1', 28), ('deliveries', 'http', 25),
                      ('deliveries', 'nats', 12), ('failures', 'http', 1), ('failures', 'webhook', 0)) AS k(kind, key, base)`,
    );
    receiver.script = [{ status: 503 }, { status: 503 }];
    for (let i = 0; i < 20; i += 1) await deliver(app.url, webhookEvent({ subjectId: String(700 + i) }));
    await deliver(app.url, '{"not":"an event"}');
    await eventually(async () => expect(receiver.acknowledgedChanges).toHaveLength(20), 20_000, 200);
    browser = await launchBrowser({ width: 1280, height: 900 });
    page = await browser.context.newPage();
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await receiver?.close();
    await app?.close();
  });

  const open = async (route: string, token: string) => {
    await page.goto(`${app.url}/console/`);
    await page.evaluate((value) => (globalThis as Json).sessionStorage.setItem('menu-sync.api-token', value), token);
    await page.goto(`${app.url}/console/#/${route}`);
    await page.reload();
  };

  it('charts the last 24 hours from the API', async () => {
    await open('activity', API_TOKEN);
    await page.locator('#history-flow canvas').waitFor({ timeout: 15_000 });
    await page.locator('#history-deliveries canvas').waitFor();
    await page.locator('#history-failures canvas').waitFor();
    // The live load, written within a flush, is in the last three minutes (the history starts before them).
    const minutes: Json[] = await eventually(
      async () => {
        const answer: Json[] = (await api(app.url, '/api/v1/activity')).json.minutes;
        expect(answer.slice(-3).reduce((total, minute) => total + minute.events, 0)).toBe(20);
        return answer;
      },
      10_000,
      250,
    );
    const sum = (pick: (minute: Json) => number) => minutes.reduce((total, minute) => total + pick(minute), 0);
    const events = sum((minute) => minute.events);
    await page
      .getByTestId('history-span')
      .filter({ hasText: `${events.toLocaleString('en-GB')} events received` })
      .waitFor({ timeout: 20_000 });
    expect((await page.getByTestId('history-span').textContent())?.replace(/\s+/g, ' ')).toContain(
      `${sum((minute) => minute.changes).toLocaleString('en-GB')} changes published`,
    );
    await page.waitForTimeout(500);
    await shot('history');
  }, 60_000);

  it('pages the event log newest first', async () => {
    await open('events', API_TOKEN);
    const rows = page.locator('#events tbody tr');
    await rows.first().waitFor({ timeout: 15_000 });
    expect(await rows.first().getAttribute('data-position')).toBe('20');
    await shot('events');
  }, 30_000);

  it('shows Pause, Resume and Remove to an admin token, none to a read token, and they work', async () => {
    await open('overview', READ_TOKEN);
    await page.locator('#sinks tbody tr').first().waitFor({ timeout: 15_000 });
    await page.waitForTimeout(500);
    expect(
      await page
        .locator('#sinks')
        .getByRole('button', { name: /^(Pause|Resume|Remove|Replay)$/ })
        .count(),
    ).toBe(0);

    await open('overview', API_TOKEN);
    const sinks = page.locator('#sinks');
    await sinks.getByRole('button', { name: 'Pause' }).click();
    await sinks.getByRole('button', { name: 'Resume' }).waitFor({ timeout: 10_000 });
    await sinks.getByText('disabled').first().waitFor();
    await shot('sink-paused');
    await sinks.getByRole('button', { name: 'Resume' }).click();
    await sinks.getByRole('button', { name: 'Pause' }).waitFor({ timeout: 10_000 });
    page.once('dialog', (dialog) => void dialog.accept());
    await sinks.getByRole('button', { name: 'Remove' }).click();
    await sinks.getByText('No sinks yet').waitFor({ timeout: 10_000 });
    expect((await api(app.url, '/api/v1/sinks')).json.data).toEqual([]);
  }, 60_000);
});

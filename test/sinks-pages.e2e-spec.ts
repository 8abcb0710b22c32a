import { runCli } from './support/cli.js';
import { insertChanges, sqlQuery } from './support/change-log-factory.js';
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
import { ensureNats, NATS_URL } from './support/nats.js';
import { SinkReceiver } from './support/sink-receiver.js';

type Json = any;

const SINKS = 250;
const READ_TOKEN = `read-token-${API_TOKEN}`;
/** Sinks 7, 57, 107, 157 and 207 are nats sinks; every other one is an http sink. */
const isNats = (n: number) => n % 50 === 7;
/** The sink whose target answers 500 to everything: it keeps its cursor and lags once changes come. */
const STUCK = 3;

/**
 * `GET /api/v1/sinks` at the scale of a sink per store (docs/reference.md §13): keyset pages,
 * filters, the failing-first order, search, the summary, and `menu-sync sinks list` paging through.
 */
describe('sinks by the page (docs/reference.md §13)', () => {
  let app: RunningDaemon;
  let good: SinkReceiver;
  let bad: SinkReceiver;
  /** The sinks' ids in creation order: sink n follows owner store-n. */
  const ids: string[] = [];
  const byIndex = (...indexes: number[]) => indexes.map((n) => ids[n]);
  const page = async (query: string, token = API_TOKEN) => {
    const answer = await api(app.url, `/api/v1/sinks${query}`, token);
    expect(answer.status).toBe(200);
    return answer.json as { data: Json[]; next_cursor: string | null };
  };
  /** Every page of `query` with `limit`, asserting each is full but the last. */
  const allPages = async (query: string, limit: number) => {
    const pages: string[][] = [];
    let after: string | null = null;
    do {
      const answer = await page(`?${query}&limit=${limit}${after === null ? '' : `&after=${after}`}`);
      pages.push(answer.data.map((sink) => sink.id));
      after = answer.next_cursor;
    } while (after !== null);
    return pages;
  };

  beforeAll(async () => {
    await (await ensureNats()).close();
    app = await startDaemon({
      NATS_URL,
      SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
      API_TOKENS: `${API_TOKEN},read:${READ_TOKEN}`,
    });
    good = await new SinkReceiver().start();
    bad = await new SinkReceiver().start();
    bad.always = { status: 500 };
    // One at a time, so that creation order (created_at, then id) is the order they were made in.
    for (let n = 0; n < SINKS; n++) {
      const body = isNats(n)
        ? { kind: 'nats', owner_ids: [`store-${n}`], from: 'now' }
        : { kind: 'http', url: (n === STUCK ? bad : good).url, owner_ids: [`store-${n}`], from: 'now' };
      const created = await sendJson(app, 'POST', '/api/v1/sinks', body);
      expect(created.status).toBe(201);
      ids.push(created.json.data.id);
    }
  }, 180_000);

  afterAll(async () => {
    await good?.close();
    await bad?.close();
    await app?.close();
  });

  it('pages through every sink in creation order, 100 at a time, the last page without a next_cursor', async () => {
    const first = await page('?limit=100');
    expect(first.data.map((sink) => sink.id)).toEqual(ids.slice(0, 100));
    expect(first.next_cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    const second = await page(`?limit=100&after=${first.next_cursor}`);
    expect(second.data.map((sink) => sink.id)).toEqual(ids.slice(100, 200));
    expect(second.next_cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    const third = await page(`?limit=100&after=${second.next_cursor}`);
    expect(third.data.map((sink) => sink.id)).toEqual(ids.slice(200, 250));
    expect(third.next_cursor).toBeNull();

    expect((await page('')).data.map((sink) => sink.id)).toEqual(ids.slice(0, 100));
    expect(await allPages('', 125)).toEqual([ids.slice(0, 125), ids.slice(125, 250)]);
    const whole = await page('?limit=250');
    expect([whole.data.map((sink) => sink.id), whole.next_cursor]).toEqual([ids, null]);
    expect(first.data[0]).toMatchObject({
      id: ids[0],
      kind: 'http',
      url: good.url,
      owner_ids: ['store-0'],
      state: 'active',
      lag: 0,
      lag_capped: false,
    });
  });

  it('filters by kind, by owner, and searches by id prefix or owner', async () => {
    expect(await allPages('kind=nats', 100)).toEqual([byIndex(7, 57, 107, 157, 207)]);
    const http = ids.filter((_, n) => !isNats(n));
    expect(await allPages('kind=http', 100)).toEqual([http.slice(0, 100), http.slice(100, 200), http.slice(200)]);
    expect(await allPages('kind=postgres', 100)).toEqual([[]]);
    expect(await allPages('owner_id=store-42', 100)).toEqual([byIndex(42)]);
    expect(await allPages('owner_id=store-4', 100)).toEqual([byIndex(4)]);
    expect(await allPages('owner_id=nobody', 100)).toEqual([[]]);
    expect(await allPages('q=store-199', 100)).toEqual([byIndex(199)]);
    expect(await allPages('kind=nats&owner_id=store-57', 100)).toEqual([byIndex(57)]);
    expect(await allPages('kind=http&owner_id=store-57', 100)).toEqual([[]]);

    const prefix = ids[123].slice(0, 4);
    const prefixed = ids.filter((id) => id.startsWith(prefix));
    expect(await allPages(`q=${prefix}`, 100)).toEqual([prefixed]);
    expect(await allPages(`q=${prefix.toUpperCase()}`, 100)).toEqual([prefixed]);
    expect(await allPages(`q=${ids[123]}`, 100)).toEqual([byIndex(123)]);
    expect(await allPages('q=%25', 100)).toEqual([[]]);
    expect(await allPages('q=_', 100)).toEqual([[]]);
  });

  it('filters by state and puts failing, then retrying, then disabled sinks first with order=failing', async () => {
    // Failures set by hand, at known instants (no change reaches these sinks, so nothing resets them).
    const failures: Array<[number, string, string]> = [
      [20, 'failing', '2025-01-03T00:00:00.000Z'],
      [5, 'failing', '2025-01-01T00:00:00.000Z'],
      [140, 'failing', '2025-01-02T00:00:00.000Z'],
      [230, 'retrying', '2025-01-05T00:00:00.000Z'],
      [60, 'retrying', '2025-01-04T00:00:00.000Z'],
    ];
    for (const [n, state, since] of failures) {
      await sqlQuery(app.database.url, `UPDATE sinks SET state = $2, failing_since = $3 WHERE id = $1`, [
        ids[n],
        state,
        since,
      ]);
    }
    expect((await sendJson(app, 'PATCH', `/api/v1/sinks/${ids[99]}`, { state: 'disabled' })).status).toBe(200);

    expect(await allPages('state=failing', 100)).toEqual([byIndex(5, 20, 140)]);
    expect(await allPages('state=retrying', 100)).toEqual([byIndex(60, 230)]);
    expect(await allPages('state=disabled', 100)).toEqual([byIndex(99)]);
    expect(await allPages('state=failing&kind=nats', 100)).toEqual([[]]);
    const healthy = ids.filter((_, n) => ![5, 20, 140, 60, 230, 99].includes(n));
    expect((await allPages('state=active', 1000)).flat()).toEqual(healthy);

    const attention = byIndex(5, 140, 20, 60, 230, 99);
    const failingFirst = [...attention, ...healthy];
    // Pages of 4 cross from failing to retrying to disabled to active sinks.
    const small = await allPages('order=failing', 4);
    expect(small.slice(0, 3)).toEqual([
      attention.slice(0, 4),
      [...attention.slice(4), ...healthy.slice(0, 2)],
      healthy.slice(2, 6),
    ]);
    expect(small.flat()).toEqual(failingFirst);
    expect((await allPages('order=failing', 100)).flat()).toEqual(failingFirst);
    expect(await allPages('order=failing&state=failing', 2)).toEqual([byIndex(5, 140), byIndex(20)]);
    const shown = (await page('?order=failing&limit=2')).data;
    expect(shown.map((sink) => [sink.id, sink.state, sink.failing_since])).toEqual([
      [ids[5], 'failing', '2025-01-01T00:00:00.000Z'],
      [ids[140], 'failing', '2025-01-02T00:00:00.000Z'],
    ]);

    const summary = await api(app.url, '/api/v1/sinks/summary');
    expect(summary.status).toBe(200);
    expect(summary.json).toEqual({
      data: {
        total: 250,
        by_state: { active: 244, retrying: 2, disabled: 1, failing: 3 },
        by_kind: { http: 245, nats: 5, postgres: 0, mysql: 0 },
        failing: [
          { id: ids[5], state: 'failing', failing_since: '2025-01-01T00:00:00.000Z' },
          { id: ids[140], state: 'failing', failing_since: '2025-01-02T00:00:00.000Z' },
          { id: ids[20], state: 'failing', failing_since: '2025-01-03T00:00:00.000Z' },
          { id: ids[60], state: 'retrying', failing_since: '2025-01-04T00:00:00.000Z' },
          { id: ids[230], state: 'retrying', failing_since: '2025-01-05T00:00:00.000Z' },
        ],
        most_lagging: [],
      },
    });
  });

  it('answers a read token the list and the summary', async () => {
    expect((await page('?limit=2', READ_TOKEN)).data.map((sink) => sink.id)).toEqual(byIndex(0, 1));
    const summary = await api(app.url, '/api/v1/sinks/summary', READ_TOKEN);
    expect([summary.status, summary.json.data.total]).toEqual([200, 250]);
    expect((await api(app.url, '/api/v1/sinks/summary', null)).status).toBe(401);
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['limit=ten', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=-1', 'limit'],
    ['after=not!a-cursor', 'after'],
    ['after=bm90LWEtY3Vyc29y', 'after'],
    [`after=${Buffer.from('c 2025-01-01T00:00:00.000000Z not-a-uuid').toString('base64url')}`, 'after'],
    ['state=broken', 'state'],
    ['state=active&state=failing', 'state'],
    ['kind=smtp', 'kind'],
    ['order=lag', 'order'],
    ['owner_id=', 'owner_id'],
    ['q=', 'q'],
    [`q=${'x'.repeat(256)}`, 'q'],
    ['cursor=abc', 'cursor'],
  ])('answers 400 problem+json naming the field for %s', async (query, field) => {
    expectFieldProblem(await api(app.url, `/api/v1/sinks?${query}`), 400, field);
  });

  it("answers 400 naming after for a cursor of the other order, and for another endpoint's", async () => {
    const created = (await page('?limit=1')).next_cursor!;
    const failing = (await page('?limit=1&order=failing')).next_cursor!;
    expectFieldProblem(await api(app.url, `/api/v1/sinks?order=failing&after=${created}`), 400, 'after');
    expectFieldProblem(await api(app.url, `/api/v1/sinks?after=${failing}`), 400, 'after');
    // A changes cursor (0.0) and an attempts cursor (a5) are not sinks' cursors.
    expectFieldProblem(await api(app.url, '/api/v1/sinks?after=MC4w'), 400, 'after');
    expectFieldProblem(await api(app.url, '/api/v1/sinks?after=YTU'), 400, 'after');
  });

  it('lists every sink with menu-sync sinks list, page after page', async () => {
    const listed = await runCli(
      ['sinks', 'list', '--json'],
      { ...app.process.env, LOG_LEVEL: 'warn' },
      undefined,
      120_000,
    );
    expect(listed.code).toBe(0);
    const sinks = JSON.parse(listed.stdout).data;
    expect(sinks.map((sink: Json) => sink.id)).toEqual(ids);
    expect(listed.stdout).not.toContain('whsec_');
  }, 150_000);

  it('shows the lag of a page, counting its own changes only, and names the most lagging sink', async () => {
    // The states the tests before set by hand stay (a sink at the head writes nothing for others' changes): undone here.
    await sqlQuery(
      app.database.url,
      `UPDATE sinks SET state = 'active', failing_since = NULL WHERE state IN ('failing', 'retrying') AND id <> $1`,
      [ids[STUCK]],
    );
    await insertChanges(
      app.database.url,
      Array.from({ length: 12 }, (_, n) => ({ type: 'product', id: `p${n}`, ownerId: `store-${STUCK}` })),
    );
    await insertChanges(
      app.database.url,
      Array.from({ length: 10_050 }, (_, n) => ({ type: 'product', id: `q${n}`, ownerId: 'elsewhere' })),
    );
    const stuck = await eventually(
      async () => {
        const view = (await api(app.url, `/api/v1/sinks/${ids[STUCK]}`)).json.data;
        expect(view).toMatchObject({ state: 'retrying', lag: 12, lag_capped: false });
        return view;
      },
      60_000,
      200,
    );
    await eventually(
      async () => {
        const summary = (await api(app.url, '/api/v1/sinks/summary')).json.data;
        expect(summary).toEqual({
          total: 250,
          by_state: { active: 248, retrying: 1, disabled: 1, failing: 0 },
          by_kind: { http: 245, nats: 5, postgres: 0, mysql: 0 },
          failing: [{ id: ids[STUCK], state: 'retrying', failing_since: stuck.failing_since }],
          // Its own 12 changes, counted through the owner index past the 10,050 of another store.
          most_lagging: [{ id: ids[STUCK], lag: 12, lag_capped: false }],
        });
      },
      120_000,
      500,
    );
    const listed = await page(`?owner_id=store-${STUCK}`);
    expect(listed.data.map((sink) => [sink.id, sink.state, sink.lag, sink.lag_capped])).toEqual([
      [ids[STUCK], 'retrying', 12, false],
    ]);
    expect((await page('?limit=3&order=failing')).data.map((sink) => [sink.id, sink.lag, sink.lag_capped])).toEqual([
      [ids[STUCK], 12, false],
      // Disabled: none of the changes after its cursor are its store's.
      [ids[99], 0, false],
      [ids[0], 0, false],
    ]);
  }, 240_000);
});

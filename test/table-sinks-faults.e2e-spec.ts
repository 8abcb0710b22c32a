import { randomUUID } from 'node:crypto';
import { insertChanges, sqlQuery } from './support/change-log-factory.js';
import { DaemonProcess } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, LOOPBACK_NETWORKS, RunningDaemon, scrape, startDaemon } from './support/http.js';
import { createMysqlTarget, MysqlTarget } from './support/mariadb.js';
import { createPostgresTarget, PostgresTarget } from './support/postgres-target.js';
import { settledSink } from './support/sink-receiver.js';
import { moneyMap } from './support/menu-events.js';
import { json } from './support/table-sinks.js';
import { TABLE_LAYOUTS } from '../src/sinks/sink.js';

type Json = any;

const REFUSED = 'the egress guard refused 127.0.0.1 (loopback): add its network to SINK_ALLOWED_NETWORKS to allow it';

const send = (baseUrl: string, method: string, path: string, body: unknown) =>
  api(baseUrl, path, API_TOKEN, {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('table sinks under faults: replays, privileges, bad input, the egress guard (docs/reference.md §12)', () => {
  let app: RunningDaemon;
  /** The daemon answering now: `app`, or the one started again over its database. */
  let baseUrl: string;
  let pgTarget: PostgresTarget;
  let myTarget: MysqlTarget;

  beforeAll(async () => {
    [pgTarget, myTarget] = await Promise.all([createPostgresTarget(), createMysqlTarget()]);
    app = await startDaemon({ SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS, SINK_FAILING_AFTER: '2s' });
    baseUrl = app.url;
  });

  afterAll(async () => {
    await DaemonProcess.killAll();
    await app?.close();
    await pgTarget?.drop();
    await myTarget?.drop();
  });

  /** A postgres sink in `schema` and a mysql sink with `prefix`, following the products of `owner`. */
  async function createSinks(owner: string, name: string, fields: Json = {}): Promise<[string, string]> {
    const common = { owner_ids: [owner], types: ['product'], ...fields };
    const pg = await send(baseUrl, 'POST', '/api/v1/sinks', {
      kind: 'postgres',
      url: pgTarget.url,
      schema: name,
      ...common,
    });
    const my = await send(baseUrl, 'POST', '/api/v1/sinks', {
      kind: 'mysql',
      url: myTarget.url,
      table_prefix: `${name}_`,
      ...common,
    });
    expect([pg.status, my.status]).toEqual([201, 201]);
    return [pg.json.data.id, my.json.data.id];
  }

  /** Each product row of `owner` in both targets: id → [seq, resource]. */
  async function targetRows(owner: string, name: string): Promise<Array<Map<string, [number, Json]>>> {
    const pg = await pgTarget.admin.query(
      `SELECT id, seq::int AS seq, resource FROM "${name}".products WHERE owner_id = $1`,
      [owner],
    );
    const [my] = await myTarget.admin.query(`SELECT id, seq, resource FROM \`${name}_products\` WHERE owner_id = ?`, [
      owner,
    ]);
    return [
      new Map(pg.rows.map((row) => [String(row.id), [row.seq as number, row.resource] as [number, Json]])),
      new Map((my as Json[]).map((row) => [String(row.id), [Number(row.seq), json(row.resource)] as [number, Json]])),
    ];
  }

  /** Each GBP price of `owner`'s products in both relational targets: product id → cents. */
  async function targetPrices(owner: string, name: string): Promise<Array<Map<string, number>>> {
    const pg = await pgTarget.admin.query(
      `SELECT product_id, cents FROM "${name}".product_prices WHERE owner_id = $1 AND currency = 'GBP'`,
      [owner],
    );
    const [my] = await myTarget.admin.query(
      `SELECT product_id, cents FROM \`${name}_product_prices\` WHERE owner_id = ? AND currency = 'GBP'`,
      [owner],
    );
    const prices = (rows: Json[]) =>
      new Map(rows.map((row) => [String(row.product_id), Number(row.cents)] as [string, number]).sort());
    return [prices(pg.rows), prices(my as Json[])];
  }

  /** The newest change of each live product of `owner`, as the tables must hold it: id → [seq, resource]. */
  async function newestChanges(owner: string): Promise<Map<string, [number, Json]>> {
    const rows = await sqlQuery(
      app.database.url,
      `SELECT DISTINCT ON (id) id, op, seq::int AS seq, resource FROM change_log WHERE owner_id = $1 ORDER BY id, seq DESC`,
      [owner],
    );
    return new Map(rows.filter((row) => row.op === 'upsert').map((row) => [row.id, [row.seq, row.resource]]));
  }

  async function expectConverged(owner: string, name: string, sinkIds: string[]): Promise<void> {
    for (const id of sinkIds)
      await settledSink(baseUrl, id, { lag: 0, state: 'active', last_error: null, failing_since: null }, 60_000);
    const expected = await newestChanges(owner);
    for (const rows of await targetRows(owner, name)) expect(rows).toEqual(expected);
  }

  it('refuses table sinks with an unknown kind, a bad scheme, an identifier that is not plain, or an unknown field, storing nothing', async () => {
    const before = (await api(baseUrl, '/api/v1/sinks')).json.data;
    const injection = 'a"; drop table x; --';
    for (const [body, field] of [
      [{ kind: 'mariadb', url: myTarget.url }, 'kind'],
      [{ kind: 'postgres', url: 'ftp://127.0.0.1/x' }, 'url'],
      [{ kind: 'mysql', url: 'ftp://127.0.0.1/x' }, 'url'],
      [{ kind: 'postgres', url: pgTarget.url, schema: injection }, 'schema'],
      [{ kind: 'mysql', url: myTarget.url, table_prefix: injection }, 'table_prefix'],
      [{ kind: 'mysql', url: myTarget.url, table_prefix: '' }, 'table_prefix'],
      [{ kind: 'postgres', url: pgTarget.url, schema: 'menu sync' }, 'schema'],
      [{ kind: 'postgres', url: pgTarget.url, tables: ['products'] }, 'tables'],
      [{ kind: 'mysql', url: myTarget.url, secret: 'whsec_mine' }, 'secret'],
    ] as const) {
      const answer = await send(baseUrl, 'POST', '/api/v1/sinks', body);
      expect([answer.status, answer.json.field, answer.headers.get('content-type')]).toEqual([
        400,
        field,
        expect.stringMatching(/^application\/problem\+json/),
      ]);
      for (const password of [pgTarget.password, myTarget.password])
        expect(answer.text).not.toContain(encodeURIComponent(password));
    }
    expect((await api(baseUrl, '/api/v1/sinks')).json.data).toEqual(before);
    const schemas = await pgTarget.admin.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'a%drop%'`);
    expect(schemas.rows).toEqual([]);
  });

  it.each(TABLE_LAYOUTS)(
    'a replay from the start never lowers a row’s seq nor brings a deleted row back (nor, relational, a price), sampled while it runs (%s layout)',
    async (layout) => {
      const owner = `replay-${randomUUID().slice(0, 6)}`;
      const name = `replayed_${layout}`;
      const sinkIds = await createSinks(owner, name, { batch_size: 5, layout });
      const inputs = [];
      for (let round = 0; round < 5; round++)
        for (let n = 0; n < 200; n++)
          inputs.push({
            type: 'product',
            id: String(n),
            ownerId: owner,
            op: round === 4 && n % 5 === 0 ? ('delete' as const) : ('upsert' as const),
            attributes: { title: `round ${round} of ${n}`, base_cost: moneyMap(round * 1000 + n) },
          });
      await insertChanges(app.database.url, inputs);
      await expectConverged(owner, name, sinkIds);
      const before = await targetRows(owner, name);
      const deleted = Array.from({ length: 40 }, (_, k) => String(k * 5));
      expect(before.map((rows) => rows.size)).toEqual([160, 160]);
      const pricesBefore = layout === 'relational' ? await targetPrices(owner, name) : [];
      if (layout === 'relational') expect(pricesBefore.map((prices) => prices.get('1'))).toEqual([4001, 4001]);

      for (const id of sinkIds)
        expect((await send(baseUrl, 'POST', `/api/v1/sinks/${id}/replay`, { from: 'start' })).status).toBe(200);
      let samples = 0;
      let duringReplay = 0;
      for (const started = Date.now(); Date.now() - started < 120_000;) {
        const views = await Promise.all(
          sinkIds.map(async (id) => (await api(baseUrl, `/api/v1/sinks/${id}`)).json.data),
        );
        const now = await targetRows(owner, name);
        samples++;
        for (const [target, rows] of now.entries()) {
          for (const [id, [seq]] of rows) expect([id, seq >= before[target].get(id)![0]]).toEqual([id, true]);
          for (const id of deleted) expect(rows.has(id)).toBe(false);
        }
        if (layout === 'relational')
          for (const [target, prices] of (await targetPrices(owner, name)).entries()) {
            expect([...prices]).toEqual([...pricesBefore[target]]);
          }
        if (views.some((view) => view.lag > 0)) duringReplay++;
        else if (views.every((view) => view.state === 'active')) break;
      }
      expect(duringReplay).toBeGreaterThanOrEqual(3);
      expect(samples).toBeGreaterThan(duringReplay);
      // The replay went through every change again: its newest attempts start at the log's first seq.
      const [first] = await sqlQuery(
        app.database.url,
        `SELECT min(seq)::int AS seq FROM change_log WHERE owner_id = $1`,
        [owner],
      );
      for (const id of sinkIds) {
        const attempts = (await api(baseUrl, `/api/v1/sinks/${id}/attempts?limit=1000`)).json.data as Json[];
        expect(attempts.filter((attempt) => attempt.batch.first_seq === first.seq).length).toBe(2);
      }
      await expectConverged(owner, name, sinkIds);
      expect(await targetRows(owner, name)).toEqual(before);
    },
    300_000,
  );

  it("a privilege revoked: retrying, then failing with the database's code in the attempts; granted again, it converges", async () => {
    const owner = `revoked-${randomUUID().slice(0, 6)}`;
    const [pgId, myId] = await createSinks(owner, 'revoked');
    await insertChanges(app.database.url, [{ type: 'product', id: '1', ownerId: owner }]);
    await expectConverged(owner, 'revoked', [pgId, myId]);

    const hosts = ['%', 'localhost', '127.0.0.1'];
    await pgTarget.admin.query(`REVOKE INSERT, UPDATE, DELETE ON revoked.products FROM ${pgTarget.role}`);
    for (const host of hosts)
      await myTarget.admin.query(`REVOKE INSERT, UPDATE, DELETE ON \`${myTarget.database}\`.* FROM ?@?`, [
        myTarget.user,
        host,
      ]);
    // MariaDB applies database privileges to new sessions: end the pool's, as an operator would.
    const [sessions] = await myTarget.admin.query(`SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?`, [
      myTarget.user,
    ]);
    for (const { ID } of sessions as Json[]) await myTarget.admin.query(`KILL CONNECTION ${Number(ID)}`);
    await insertChanges(app.database.url, [{ type: 'product', id: '2', ownerId: owner, attributes: { title: 'two' } }]);

    const pgError = 'PostgreSQL error 42501: permission denied for table products';
    const myError = expect.stringMatching(
      /^MySQL error ER_TABLEACCESS_DENIED_ERROR \(1142\): INSERT, UPDATE command denied to user '[a-z0-9_]+'@'127\.0\.0\.1' for table `menu_sync_target_[0-9a-f_]+`\.`revoked_products`$/,
    );
    await settledSink(baseUrl, pgId, { state: 'retrying', lag: 1, last_error: pgError }, 30_000);
    await settledSink(baseUrl, myId, { state: 'retrying', lag: 1, last_error: myError }, 30_000);
    await settledSink(baseUrl, pgId, { state: 'failing', lag: 1, last_error: pgError }, 30_000);
    await settledSink(baseUrl, myId, { state: 'failing', lag: 1, last_error: myError }, 30_000);
    for (const [id, status, error] of [
      [pgId, '42501', pgError],
      [myId, 1142, myError],
    ] as const) {
      await eventually(async () => {
        const [newest] = (await api(baseUrl, `/api/v1/sinks/${id}/attempts`)).json.data as Json[];
        expect(newest).toMatchObject({ outcome: 'retry', status, error, batch: { changes: 1 } });
      });
    }

    await pgTarget.admin.query(`GRANT INSERT, UPDATE, DELETE ON revoked.products TO ${pgTarget.role}`);
    for (const host of hosts)
      await myTarget.admin.query(`GRANT ALL ON \`${myTarget.database}\`.* TO ?@?`, [myTarget.user, host]);
    // The backoff has grown meanwhile; enabling the sinks again retries at once.
    for (const id of [pgId, myId]) await send(baseUrl, 'PATCH', `/api/v1/sinks/${id}`, { state: 'active' });
    await expectConverged(owner, 'revoked', [pgId, myId]);
    expect((await targetRows(owner, 'revoked')).map((rows) => rows.get('2')?.[1].attributes.title)).toEqual([
      'two',
      'two',
    ]);
  }, 180_000);

  it('with SINK_ALLOWED_NETWORKS empty: 422 naming url at creation, and every connection of a stored sink refused and counted', async () => {
    const owner = `egress-${randomUUID().slice(0, 6)}`;
    const sinkIds = await createSinks(owner, 'egress');
    await insertChanges(app.database.url, [{ type: 'product', id: '1', ownerId: owner }]);
    await expectConverged(owner, 'egress', sinkIds);

    const { PORT: _port, ...env } = app.process.env;
    const restart = async (networks: string) => {
      app.process.kill('SIGTERM');
      await app.process.waitForExit(15_000);
      app.process = await DaemonProcess.start({
        cwd: app.process.cwd,
        env: { ...env, SINK_ALLOWED_NETWORKS: networks },
      });
      baseUrl = app.process.url;
    };
    await restart('');
    const listed = (await api(baseUrl, '/api/v1/sinks')).json.data;
    for (const body of [
      { kind: 'postgres', url: pgTarget.url, owner_ids: ['nobody'] },
      { kind: 'mysql', url: myTarget.url, owner_ids: ['nobody'] },
      { kind: 'postgres', url: pgTarget.url.replace('@127.0.0.1:', '@localhost:'), owner_ids: ['nobody'] },
    ]) {
      const answer = await send(baseUrl, 'POST', '/api/v1/sinks', body);
      expect(answer.status).toBe(422);
      expect(answer.json).toMatchObject({ field: 'url', detail: expect.stringContaining('SINK_ALLOWED_NETWORKS') });
    }
    expect(((await api(baseUrl, '/api/v1/sinks')).json.data as Json[]).map((sink) => sink.id)).toEqual(
      (listed as Json[]).map((sink) => sink.id),
    );

    await insertChanges(app.database.url, [{ type: 'product', id: '2', ownerId: owner }]);
    for (const id of sinkIds) {
      await settledSink(baseUrl, id, { state: 'retrying', lag: 1, last_error: REFUSED }, 30_000);
      // A fresh daemon reads the target's cursor before it sends a batch: that read is refused, an
      // attempt of no batch with status 0.
      expect(await scrape(baseUrl, 'menu_sync_sink_egress_refused_total', { sink: id })).toBeGreaterThanOrEqual(1);
      // Attempts are written in the background, up to a fifth of a second after the sink's state.
      await eventually(async () => {
        const [newest] = (await api(baseUrl, `/api/v1/sinks/${id}/attempts`)).json.data as Json[];
        expect(newest).toMatchObject({
          outcome: 'retry',
          status: 0,
          error: REFUSED,
          batch: { first_seq: null, last_seq: null, changes: 0 },
        });
      });
    }
    const [pgRows, myRows] = await targetRows(owner, 'egress');
    expect([[...pgRows.keys()], [...myRows.keys()]]).toEqual([['1'], ['1']]);

    await restart(LOOPBACK_NETWORKS);
    await expectConverged(owner, 'egress', sinkIds);
  }, 180_000);
});

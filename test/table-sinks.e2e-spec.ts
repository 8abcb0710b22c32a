import { randomUUID } from 'node:crypto';
import { insertChanges, sqlQuery } from './support/change-log-factory.js';
import { runCli } from './support/cli.js';
import { DaemonProcess } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, deliver, RunningDaemon, startDaemon } from './support/http.js';
import { createMysqlTarget, mysqlColumns, MysqlTarget } from './support/mariadb.js';
import {
  at,
  collection,
  destroyedEvent,
  menuEvent,
  order,
  orderEvent,
  orderProduct,
  product,
  store,
  trait,
  traitOption,
  user,
} from './support/menu-events.js';
import { createPostgresTarget, postgresColumns, PostgresTarget } from './support/postgres-target.js';
import { settledSink } from './support/sink-receiver.js';
import { expectRowMatches, json, TABLE_TYPES } from './support/table-sinks.js';

type Json = any;

const TABLES = TABLE_TYPES;

const post = (app: RunningDaemon, path: string, body: unknown) =>
  api(app.url, path, API_TOKEN, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

/**
 * Events of one owner (ids offset by `base`, so owners never share an id): a menu with orders,
 * updates, destroys, a duplicate delivery and an update older than the one already applied.
 */
function ownerEvents(ownerId: string, base: number): Json[] {
  let minute = 0;
  const meta = () => ({ at: at(minute++), ownerId });
  const id = (n: number) => String(base + n);
  const events: Json[] = [
    menuEvent('created', product(id(10), { traitIds: [id(20)] }), meta()),
    menuEvent('created', product(id(11), { cents: 1200 }), meta()),
    menuEvent('created', product(id(12)), meta()),
    menuEvent('created', trait(id(20), { optionIds: [id(30), id(31)] }), meta()),
    menuEvent('created', traitOption(id(30), { traitId: id(20), isDefault: true }), meta()),
    menuEvent('created', traitOption(id(31), { traitId: id(20) }), meta()),
    menuEvent('created', collection(id(1), { productIds: [id(10), id(11), id(12)] }), meta()),
  ];
  const parts = (status: string) => ({
    user: user(id(9)),
    order: order(id(40), { orderProductIds: [id(41)], storeId: id(50), userId: id(9), status, note: `for ${ownerId}` }),
    orderProducts: [orderProduct(id(41), { productId: id(10), quantity: 2 })],
    store: store(id(50), { title: `Store of ${ownerId}` }),
  });
  events.push(orderEvent('created', parts('pending'), meta()));
  const renamed = menuEvent('updated', product(id(10), { title: 'Renamed', traitIds: [id(20)] }), meta());
  events.push(renamed, renamed);
  const stale = menuEvent('updated', product(id(11), { title: 'Stale' }), { at: at(-5), ownerId });
  events.push(menuEvent('updated', product(id(11), { title: 'Newest', available: false }), meta()), stale);
  events.push(destroyedEvent('product', id(12), meta()), destroyedEvent('trait_option', id(31), meta()));
  events.push(menuEvent('updated', collection(id(1), { productIds: [id(11), id(10)] }), meta()));
  events.push(orderEvent('updated', parts('accepted'), meta()));
  return events;
}

describe('table sinks: PostgreSQL and MySQL targets kept equal to the API (docs/reference.md §12)', () => {
  let app: RunningDaemon;
  let pgTarget: PostgresTarget;
  let myTarget: MysqlTarget;
  const owners = [
    `tables-a-${randomUUID().slice(0, 6)}`,
    `tables-b-${randomUUID().slice(0, 6)}`,
    `tables-c-${randomUUID().slice(0, 6)}`,
  ];

  beforeAll(async () => {
    [pgTarget, myTarget] = await Promise.all([createPostgresTarget(), createMysqlTarget()]);
    app = await startDaemon({
      SINK_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128',
      CHANGES_TYPES: Object.values(TABLES).join(','),
      SINK_FAILING_AFTER: '2s',
    });
  });

  afterAll(async () => {
    await DaemonProcess.killAll();
    await app?.close();
    await pgTarget?.drop();
    await myTarget?.drop();
  });

  /** The API's live resources of one owner and type. */
  async function apiResources(ownerId: string, type: string): Promise<Json[]> {
    const answer = await api(app.url, `/api/v1/${TABLES[type]}?owner_id=${ownerId}&limit=1000`);
    expect(answer.status).toBe(200);
    return answer.json.data;
  }

  /** Waits until the sink has delivered every change, then compares each of its tables with the API. */
  async function expectEqualToApi(
    sinkId: string,
    rowsOf: (table: string) => Promise<Json[]>,
    columnsOf: (table: string) => Promise<string[]>,
  ): Promise<void> {
    await eventually(
      async () => {
        const projections = (await api(app.url, '/api/v1/projections')).json.data;
        expect(projections.every((projection: Json) => projection.lag === 0)).toBe(true);
        const sink = (await api(app.url, `/api/v1/sinks/${sinkId}`)).json.data;
        expect([sink.lag, sink.state, sink.last_error]).toEqual([0, 'active', null]);
      },
      60_000,
      100,
    );
    for (const [type, table] of Object.entries(TABLES)) {
      const columns = await columnsOf(table);
      const rows = await rowsOf(table);
      for (const ownerId of owners) {
        const expected = await apiResources(ownerId, type);
        const mine = rows.filter((row) => row.owner_id === ownerId);
        expect(mine.map((row) => String(row.id)).sort()).toEqual(expected.map((resource) => resource.id).sort());
        const byId = new Map(mine.map((row) => [String(row.id), row]));
        for (const resource of expected) expectRowMatches(byId.get(resource.id), resource, columns);
      }
    }
  }

  it('refuses table sinks with a bad url, schema or table_prefix, naming the field', async () => {
    for (const [body, field] of [
      [{ kind: 'postgres', url: 'http://127.0.0.1:1/x' }, 'url'],
      [{ kind: 'mysql', url: pgTarget.url }, 'url'],
      [{ kind: 'mysql', url: 'mysql://u:p@127.0.0.1:3306/' }, 'url'],
      [{ kind: 'postgres', url: pgTarget.url, schema: 'Bad-Name' }, 'schema'],
      [{ kind: 'postgres', url: pgTarget.url, schema: 'x"; DROP TABLE sinks; --' }, 'schema'],
      [{ kind: 'mysql', url: myTarget.url, table_prefix: 'a`b' }, 'table_prefix'],
      [{ kind: 'postgres', url: pgTarget.url, table_prefix: 'shop_' }, 'table_prefix'],
      [{ kind: 'mysql', url: myTarget.url, schema: 'shop' }, 'schema'],
    ] as const) {
      const answer = await post(app, '/api/v1/sinks', body);
      expect([answer.status, answer.json.field]).toEqual([400, field]);
      expect(answer.text).not.toContain(pgTarget.password);
      expect(answer.text).not.toContain(encodeURIComponent(pgTarget.password));
    }
    expect((await api(app.url, '/api/v1/sinks')).json.data).toEqual([]);
  });

  it('keeps a PostgreSQL schema and MySQL tables equal to the API across owners, updates, destroys, duplicates and stale events', async () => {
    const pgSink = await post(app, '/api/v1/sinks', {
      kind: 'postgres',
      url: pgTarget.url,
      schema: 'catalogue',
      batch_size: 7,
    });
    expect(pgSink.status).toBe(201);
    expect(pgSink.json.data).toMatchObject({
      kind: 'postgres',
      url: `postgres://${pgTarget.role}:***@127.0.0.1:5432/${pgTarget.database}`,
      schema: 'catalogue',
      batch_size: 7,
    });
    expect(pgSink.json.data.secret).toBeUndefined();
    const mySink = await post(app, '/api/v1/sinks', {
      kind: 'mysql',
      url: myTarget.url,
      table_prefix: 'shop_',
      batch_size: 5,
    });
    expect(mySink.status).toBe(201);
    expect(mySink.json.data).toMatchObject({
      kind: 'mysql',
      url: `mysql://${myTarget.user}:***@127.0.0.1:3306/${myTarget.database}`,
      table_prefix: 'shop_',
    });

    for (const [index, ownerId] of owners.entries()) {
      for (const event of ownerEvents(ownerId, (index + 1) * 1000)) {
        const answer = await deliver(app.url, event);
        expect([200, 202]).toContain(answer.status);
      }
    }

    await expectEqualToApi(
      pgSink.json.data.id,
      async (table) => (await pgTarget.admin.query(`SELECT * FROM catalogue.${table}`)).rows,
      (table) => postgresColumns(pgTarget, 'catalogue', table),
    );
    await expectEqualToApi(
      mySink.json.data.id,
      async (table) => (await myTarget.admin.query(`SELECT * FROM shop_${table}`))[0] as Json[],
      (table) => mysqlColumns(myTarget, `shop_${table}`),
    );

    // What the tables hold, spelled out for one owner.
    const products = await pgTarget.admin.query(
      `SELECT id, title, available, traits_ids FROM catalogue.products WHERE owner_id = $1 ORDER BY id`,
      [owners[0]],
    );
    expect(products.rows).toEqual([
      { id: '1010', title: 'Renamed', available: true, traits_ids: ['1020'] },
      { id: '1011', title: 'Newest', available: false, traits_ids: [] },
    ]);
    const [orders] = await myTarget.admin.query(
      `SELECT id, status, note, store_ids FROM shop_orders WHERE owner_id = ?`,
      [owners[1]],
    );
    expect((orders as Json[]).map((row) => ({ ...row, store_ids: json(row.store_ids) }))).toEqual([
      { id: '2040', status: 'accepted', note: `for ${owners[1]}`, store_ids: ['2050'] },
    ]);
    const collections = await pgTarget.admin.query(
      `SELECT products_ids FROM catalogue.collections WHERE owner_id = $1`,
      [owners[2]],
    );
    expect(collections.rows).toEqual([{ products_ids: ['3011', '3010'] }]);

    // The URL's password: never in an answer, nor in clear in the daemon's database, nor in its logs.
    const listed = await api(app.url, '/api/v1/sinks');
    expect(listed.json.data.map((sink: Json) => sink.url)).toEqual([pgSink.json.data.url, mySink.json.data.url]);
    const stored = await sqlQuery(
      app.database.url,
      `SELECT url, url_sealed, schema, table_prefix FROM sinks ORDER BY created_at`,
    );
    expect(stored.map((row) => [row.url, row.schema, row.table_prefix])).toEqual([
      [pgSink.json.data.url, 'catalogue', null],
      [mySink.json.data.url, null, 'shop_'],
    ]);
    for (const [row, password] of [
      [stored[0], pgTarget.password],
      [stored[1], myTarget.password],
    ] as const) {
      expect(row.url_sealed.includes(Buffer.from(password))).toBe(false);
      expect(row.url_sealed.includes(Buffer.from(encodeURIComponent(password)))).toBe(false);
      expect(listed.text).not.toContain(encodeURIComponent(password));
      expect(app.process.logs).not.toContain(encodeURIComponent(password));
      expect(app.process.logs).not.toContain(password);
    }
  }, 240_000);
  it('a table changed by hand so that writes fail: retrying, then failing with the statement error, and it resumes once fixed', async () => {
    const owner = `by-hand-${randomUUID().slice(0, 6)}`;
    const created = await post(app, '/api/v1/sinks', {
      kind: 'postgres',
      url: pgTarget.url,
      schema: 'by_hand',
      owner_ids: [owner],
      types: ['product'],
    });
    const id = created.json.data.id;
    await insertChanges(app.database.url, [{ type: 'product', id: '1', ownerId: owner, attributes: { title: 'one' } }]);
    await settledSink(app.url, id, { lag: 0, state: 'active' }, 30_000);
    await pgTarget.admin.query(`ALTER TABLE by_hand.products ADD CONSTRAINT short_titles CHECK (length(title) < 5)`);
    await insertChanges(app.database.url, [
      { type: 'product', id: '2', ownerId: owner, attributes: { title: 'too long' } },
    ]);
    const failing = await settledSink(app.url, id, { state: 'failing', lag: 1 }, 30_000);
    expect(failing.last_error).toBe(
      'PostgreSQL error 23514: new row for relation "products" violates check constraint "short_titles"',
    );
    await pgTarget.admin.query(`ALTER TABLE by_hand.products DROP CONSTRAINT short_titles`);
    // The backoff has grown meanwhile; enabling the sink again retries at once.
    await api(app.url, `/api/v1/sinks/${id}`, API_TOKEN, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ state: 'active' }),
    });
    await settledSink(app.url, id, { lag: 0, state: 'active', last_error: null, failing_since: null }, 30_000);
    const { rows } = await pgTarget.admin.query(`SELECT id, title FROM by_hand.products ORDER BY id`);
    expect(rows).toEqual([
      { id: '1', title: 'one' },
      { id: '2', title: 'too long' },
    ]);
  });

  it('menu-sync sinks add --kind postgres|mysql with --schema / --table-prefix; list shows the URL masked', async () => {
    const env = { ...app.process.env, LOG_LEVEL: 'warn' };
    const pgAdded = await runCli(
      [
        'sinks',
        'add',
        '--kind',
        'postgres',
        '--url',
        pgTarget.url,
        '--schema',
        'from_cli',
        '--owner-ids',
        'nobody',
        '--json',
      ],
      env,
      undefined,
      120_000,
    );
    expect(pgAdded.code).toBe(0);
    const myAdded = await runCli(
      [
        'sinks',
        'add',
        '--kind',
        'mysql',
        '--url',
        myTarget.url,
        '--table-prefix',
        'cli_',
        '--owner-ids',
        'nobody',
        '--json',
      ],
      env,
      undefined,
      120_000,
    );
    expect(myAdded.code).toBe(0);
    const pgSink = JSON.parse(pgAdded.stdout).data;
    const mySink = JSON.parse(myAdded.stdout).data;
    expect([pgSink.kind, pgSink.url, pgSink.schema]).toEqual([
      'postgres',
      `postgres://${pgTarget.role}:***@127.0.0.1:5432/${pgTarget.database}`,
      'from_cli',
    ]);
    expect([mySink.kind, mySink.url, mySink.table_prefix]).toEqual([
      'mysql',
      `mysql://${myTarget.user}:***@127.0.0.1:3306/${myTarget.database}`,
      'cli_',
    ]);
    const listed = await runCli(['sinks', 'list'], env, undefined, 120_000);
    expect(listed.code).toBe(0);
    const refused = await runCli(
      ['sinks', 'add', '--kind', 'postgres', '--url', pgTarget.url, '--table-prefix', 'x_'],
      env,
      undefined,
      120_000,
    );
    expect([refused.code, refused.stderr.trim()]).toEqual([
      2,
      'menu-sync sinks add: table_prefix is only for mysql sinks (table_prefix)',
    ]);
    for (const text of [pgAdded.stdout, myAdded.stdout, listed.stdout, listed.stderr, refused.stderr]) {
      expect(text).not.toContain(encodeURIComponent(pgTarget.password));
      expect(text).not.toContain(encodeURIComponent(myTarget.password));
    }

    // PATCH url: a URL of the sink's own kind only, stored sealed and answered masked.
    const patch = (id: string, body: unknown) =>
      api(app.url, `/api/v1/sinks/${id}`, API_TOKEN, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const wrongKind = await patch(pgSink.id, { url: myTarget.url });
    expect([wrongKind.status, wrongKind.json.field]).toEqual([400, 'url']);
    expect(wrongKind.text).not.toContain(encodeURIComponent(myTarget.password));
    const repointed = await patch(pgSink.id, { url: pgTarget.url.replace('@127.0.0.1:', '@localhost:') });
    expect([repointed.status, repointed.json.data.url]).toEqual([
      200,
      `postgres://${pgTarget.role}:***@localhost:5432/${pgTarget.database}`,
    ]);
    const stored = await sqlQuery(app.database.url, `SELECT url FROM sinks WHERE id = $1`, [pgSink.id]);
    expect(stored).toEqual([{ url: repointed.json.data.url }]);
    for (const id of [pgSink.id, mySink.id])
      expect((await runCli(['sinks', 'remove', id], env, undefined, 120_000)).code).toBe(0);
  }, 300_000);

  it("disabling a table sink closes its pool: no connection of the sink's user is left in either target", async () => {
    const connections = async () => {
      const { rows } = await pgTarget.admin.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1`,
        [pgTarget.role],
      );
      const [processes] = await myTarget.admin.query(
        `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE USER = ?`,
        [myTarget.user],
      );
      return [rows[0].n, Number((processes as Json[])[0].n)];
    };
    const sinks = (await api(app.url, '/api/v1/sinks')).json.data as Json[];
    expect(sinks.map((sink) => sink.kind).sort()).toEqual(['mysql', 'postgres', 'postgres']);
    // A pg pool ends connections idle for 30 s (the CLI test may take that long): a change wakes the pools.
    await insertChanges(app.database.url, [{ type: 'product', id: 'wake-up', ownerId: owners[0] }]);
    await eventually(
      async () => {
        const [pgOpen, myOpen] = await connections();
        expect(pgOpen).toBeGreaterThanOrEqual(1);
        expect(myOpen).toBeGreaterThanOrEqual(1);
      },
      15_000,
      100,
    );
    for (const sink of sinks) {
      const answer = await api(app.url, `/api/v1/sinks/${sink.id}`, API_TOKEN, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ state: 'disabled' }),
      });
      expect(answer.json.data.state).toBe('disabled');
    }
    await eventually(async () => expect(await connections()).toEqual([0, 0]), 15_000, 100);
  });

  it('a SIGKILL of the daemon during a 3,000-change backlog: after a restart both targets equal the newest changes, none applied twice', async () => {
    const owner = `durable-${randomUUID().slice(0, 6)}`;
    const pgSink = await post(app, '/api/v1/sinks', {
      kind: 'postgres',
      url: pgTarget.url,
      schema: 'durable',
      owner_ids: [owner],
      types: ['product'],
      batch_size: 20,
    });
    const mySink = await post(app, '/api/v1/sinks', {
      kind: 'mysql',
      url: myTarget.url,
      table_prefix: 'durable_',
      owner_ids: [owner],
      types: ['product'],
      batch_size: 20,
    });
    const settled = (baseUrl: string) =>
      Promise.all(
        [pgSink, mySink].map((sink) => settledSink(baseUrl, sink.json.data.id, { lag: 0, state: 'active' }, 120_000)),
      );
    // The sinks make their tables with the first change; then triggers count every write per (id, seq).
    await insertChanges(app.database.url, [{ type: 'product', id: `${owner}-first`, ownerId: owner }]);
    await settled(app.url);
    await pgTarget.admin.query(`
      CREATE TABLE durable.applications (id text, seq bigint, n integer NOT NULL DEFAULT 1, PRIMARY KEY (id, seq));
      CREATE FUNCTION durable.count_application() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO durable.applications (id, seq) VALUES (NEW.id, NEW.seq)
            ON CONFLICT (id, seq) DO UPDATE SET n = durable.applications.n + 1;
          RETURN NEW;
        END $$;
      CREATE TRIGGER count_application AFTER INSERT OR UPDATE ON durable.products
        FOR EACH ROW EXECUTE FUNCTION durable.count_application();
      GRANT ALL ON durable.applications TO ${pgTarget.role};`);
    await myTarget.admin.query(
      `CREATE TABLE durable_applications (id VARCHAR(255), seq BIGINT, n INT NOT NULL DEFAULT 1, PRIMARY KEY (id, seq))`,
    );
    for (const event of ['INSERT', 'UPDATE'])
      await myTarget.admin.query(
        `CREATE TRIGGER durable_count_${event.toLowerCase()} AFTER ${event} ON durable_products FOR EACH ROW
           INSERT INTO durable_applications (id, seq) VALUES (NEW.id, NEW.seq) ON DUPLICATE KEY UPDATE n = n + 1`,
      );

    const inputs = [];
    for (let round = 0; round < 3; round++)
      for (let n = 0; n < 1000; n++)
        inputs.push({
          type: 'product',
          id: `${owner}-${n}`,
          ownerId: owner,
          op: round === 2 && n % 10 === 0 ? ('delete' as const) : ('upsert' as const),
          attributes: { title: `round ${round} of ${n}`, available: n % 2 === 0 },
        });
    await insertChanges(app.database.url, inputs);
    await eventually(
      async () => {
        const { rows } = await pgTarget.admin.query(`SELECT count(*)::int AS n FROM durable.applications`);
        expect(rows[0].n).toBeGreaterThanOrEqual(300);
      },
      60_000,
      5,
    );
    app.process.kill('SIGKILL');
    await app.process.waitForExit(10_000);
    const { rows: applied } = await pgTarget.admin.query(`SELECT count(*)::int AS n FROM durable.applications`);
    expect(applied[0].n).toBeLessThan(2000);
    const { PORT: _port, ...env } = app.process.env;
    const restarted = await DaemonProcess.start({ cwd: app.process.cwd, env });
    await settled(restarted.url);

    const changes = await sqlQuery(
      app.database.url,
      `SELECT DISTINCT ON (id) id, op, seq::int AS seq, resource FROM change_log WHERE owner_id = $1 ORDER BY id, seq DESC`,
      [owner],
    );
    const live = changes.filter((change) => change.op === 'upsert');
    expect(live.length).toBe(901);
    const expected = live.map((change) => [change.id, change.seq, change.resource]).sort();
    const pgRows = await pgTarget.admin.query(`SELECT id, seq::int AS seq, resource FROM durable.products`);
    expect(pgRows.rows.map((row) => [row.id, row.seq, row.resource]).sort()).toEqual(expected);
    const [myRows] = await myTarget.admin.query(`SELECT id, seq, resource FROM durable_products`);
    expect((myRows as Json[]).map((row) => [row.id, Number(row.seq), json(row.resource)]).sort()).toEqual(expected);
    const twice = await pgTarget.admin.query(`SELECT id, seq, n FROM durable.applications WHERE n > 1`);
    expect(twice.rows).toEqual([]);
    const [myTwice] = await myTarget.admin.query(`SELECT id, seq, n FROM durable_applications WHERE n > 1`);
    expect(myTwice).toEqual([]);
    // No batch holds two changes of one product (each is changed every 1,000 changes): every upsert
    // of the backlog (2,900; the first change came before the triggers) was written exactly once (MySQL counts a resent row too: its
    // ON DUPLICATE KEY UPDATE fires the update trigger even when the seq guard keeps the row).
    const { rows: total } = await pgTarget.admin.query(`SELECT count(*)::int AS n FROM durable.applications`);
    expect(total[0].n).toBe(2900);
    const [myTotal] = await myTarget.admin.query(`SELECT count(*) AS n FROM durable_applications`);
    expect(Number((myTotal as Json[])[0].n)).toBe(2900);
  }, 300_000);
});

import { randomUUID } from 'node:crypto';
import { insertChanges, sqlQuery } from './support/change-log-factory.js';
import { runCli } from './support/cli.js';
import { DaemonProcess } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import { api, API_TOKEN, RunningDaemon, startDaemon } from './support/http.js';
import { createMysqlTarget, MysqlTarget } from './support/mariadb.js';
import { createPostgresTarget, PostgresTarget } from './support/postgres-target.js';
import { settledSink } from './support/sink-receiver.js';
import { keepsTablesEqualToApi, postJson, survivesSigkill } from './support/table-sink-scenarios.js';
import { ALL_TYPES } from './support/table-sinks.js';

type Json = any;

const post = postJson;

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
      CHANGES_TYPES: ALL_TYPES.join(','),
      SINK_FAILING_AFTER: '2s',
    });
  });

  afterAll(async () => {
    await DaemonProcess.killAll();
    await app?.close();
    await pgTarget?.drop();
    await myTarget?.drop();
  });

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
    await keepsTablesEqualToApi({ app, pgTarget, myTarget }, 'document');
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
    await survivesSigkill({ app, pgTarget, myTarget }, 'document');
  }, 300_000);
});

import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { MIGRATIONS } from '../migrations/index.js';
import { CliResult, describeRun, runCli } from './support/cli.js';
import { TEST_SERVER_URL } from './support/database.js';
import { api, API_TOKEN, LOOPBACK_NETWORKS, RunningDaemon, startDaemon } from './support/http.js';

/**
 * Issue 41, item 3: the CLI's manners, against a real daemon and its database. Human output is a
 * table (`--json` gives the API's JSON); a unique id prefix names a sink and an ambiguous one is
 * refused, saying why; results go to stdout and errors to stderr; exit 0 / 1 / 2; with
 * MENU_SYNC_URL the commands ask the daemon's API and answer the same; `migrate` needs only
 * DATABASE_URL.
 */

type Json = any;

/** Enough that, with two removed, two ids still start alike (16 hex digits). */
const SINKS = 19;

describe('the CLI: tables and --json, id prefixes, stdout and stderr, exit codes, MENU_SYNC_URL', () => {
  let app: RunningDaemon;
  let direct: Record<string, string>;
  let viaApi: Record<string, string>;
  let sinks: Json[];
  /** A first character that several sinks' ids share. */
  let shared: string;

  const cli = (args: string[], env: Record<string, string>) => runCli(args, env, undefined, 120_000);
  const ok = (result: CliResult) =>
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' });

  beforeAll(async () => {
    app = await startDaemon({ SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS, LOG_LEVEL: 'warn' });
    direct = {
      DATABASE_URL: app.database.url,
      TOKEN_ENCRYPTION_KEY: app.process.env.TOKEN_ENCRYPTION_KEY,
      WEBHOOK_KEYS: app.process.env.WEBHOOK_KEYS,
      SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
      LOG_LEVEL: 'warn',
    };
    viaApi = { MENU_SYNC_URL: app.url, MENU_SYNC_TOKEN: API_TOKEN, LOG_LEVEL: 'warn' };
    for (let i = 0; i < SINKS; i++) {
      const created = await api(app.url, '/api/v1/sinks', API_TOKEN, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'http', url: `http://127.0.0.1:9/hook-${i}`, owner_ids: [`o${i}`], from: 'now' }),
      });
      expect(created.status).toBe(201);
    }
    sinks = (await api(app.url, '/api/v1/sinks?limit=1000')).json.data;
    const byFirst = new Map<string, number>();
    for (const sink of sinks) byFirst.set(sink.id[0], (byFirst.get(sink.id[0]) ?? 0) + 1);
    shared = [...byFirst].find(([, n]) => n > 1)![0];
  }, 180_000);

  afterAll(async () => {
    await app?.close();
  });

  it('--help is named menu-sync and goes to stdout; bad usage exits 2 with the error on stderr', async () => {
    const help = await cli(['--help'], {});
    ok(help);
    expect(help.stdout.split('\n')[0]).toBe('Usage: menu-sync [options] [command]');
    const sinksHelp = await cli(['sinks', '--help'], {});
    ok(sinksHelp);
    expect(sinksHelp.stdout.split('\n')[0]).toBe('Usage: menu-sync sinks [options] [command]');
    expect(sinksHelp.stdout).toMatch(/^ {2}show \[options\] <id>/m);
    for (const args of [['frobnicate'], ['sinks', 'list', '--frobnicate'], ['status', '--lag-threshold', 'x']]) {
      const refused = await cli(args, direct);
      expect({ args, code: refused.code, stdout: refused.stdout }).toEqual({ args, code: 2, stdout: '' });
      expect(refused.stderr).toMatch(/^error: /);
    }
  }, 120_000);

  it.each([
    ['on the database', () => direct],
    ['through MENU_SYNC_URL', () => viaApi],
  ])(
    'sinks list %s: a table, the shortest unique ids of 8 characters or more; --json is the API page',
    async (_, env) => {
      const table = await cli(['sinks', 'list'], env());
      ok(table);
      const [header, ...rows] = table.stdout.trimEnd().split('\n');
      expect(header.split(/ {2,}/)).toEqual([
        'ID',
        'KIND',
        'STATE',
        'LAG',
        'OWNERS',
        'TARGET',
        'LAST SUCCESS',
        'LAST ERROR',
      ]);
      expect(rows.map((row) => row.split(/ {2,}/).slice(0, 7))).toEqual(
        sinks.map((sink) => [sink.id.slice(0, 8), 'http', 'active', '0', sink.owner_ids[0], sink.url, 'never']),
      );
      const json = await cli(['sinks', 'list', '--json'], env());
      ok(json);
      expect(JSON.parse(json.stdout)).toEqual({ data: sinks });
    },
    120_000,
  );

  it.each([
    ['on the database', () => direct],
    ['through MENU_SYNC_URL', () => viaApi],
  ])(
    'sinks show %s: a unique prefix names the sink; an ambiguous or unknown one is refused on stderr',
    async (_, env) => {
      const sink = sinks[3];
      const shown = await cli(['sinks', 'show', sink.id.slice(0, 8)], env());
      ok(shown);
      const fields = Object.fromEntries(
        shown.stdout
          .trimEnd()
          .split('\n')
          .map((line) => /^([a-z ]+):\s+(.*)$/.exec(line)!.slice(1)),
      );
      expect(fields).toMatchObject({
        id: sink.id,
        kind: 'http',
        target: sink.url,
        state: 'active',
        owners: sink.owner_ids[0],
      });
      const json = await cli(['sinks', 'show', sink.id.slice(0, 8).toUpperCase(), '--json'], env());
      ok(json);
      expect(JSON.parse(json.stdout)).toEqual((await api(app.url, `/api/v1/sinks/${sink.id}`)).json);

      const matching = sinks.filter((other) => other.id.startsWith(shared)).map((other) => other.id);
      const ambiguous = await cli(['sinks', 'show', shared], env());
      expect({ code: ambiguous.code, stdout: ambiguous.stdout, stderr: ambiguous.stderr }).toEqual({
        code: 2,
        stdout: '',
        stderr: `menu-sync sinks show: ${shared} is the start of ${matching.length} sinks' ids (${matching.slice(0, 5).join(', ')}${matching.length > 5 ? ', …' : ''}): give more of it.\n`,
      });
      for (const unknown of ['fffffffff0', 'not-an-id!', '00000000-0000-4000-8000-000000000000']) {
        const refused = await cli(['sinks', 'show', unknown], env());
        expect({ code: refused.code, stdout: refused.stdout, stderr: refused.stderr }).toEqual({
          code: 1,
          stdout: '',
          stderr: `menu-sync sinks show: No sink ${unknown}.\n`,
        });
      }
    },
    120_000,
  );

  it.each([
    ['on the database', () => direct, 0],
    ['through MENU_SYNC_URL', () => viaApi, 1],
  ])(
    'sinks remove %s takes a unique prefix, says what it removed on stdout, and refuses an ambiguous one',
    async (_, env, index) => {
      const sink = sinks[index];
      const removed = await cli(['sinks', 'remove', sink.id.slice(0, 8)], env());
      ok(removed);
      expect(removed.stdout).toBe(`removed ${sink.id}\n`);
      expect((await api(app.url, `/api/v1/sinks/${sink.id}`)).status).toBe(404);
      const left: Json[] = (await api(app.url, '/api/v1/sinks?limit=1000')).json.data;
      const first = (id: string) => left.filter((other) => other.id[0] === id[0]).length;
      const prefix = left.find((other) => first(other.id) > 1)!.id[0];
      const ambiguous = await cli(['sinks', 'remove', prefix], env());
      expect([ambiguous.code, ambiguous.stdout]).toEqual([2, '']);
      expect(ambiguous.stderr).toMatch(
        new RegExp(`^menu-sync sinks remove: ${prefix} is the start of ${first(prefix)} sinks' ids`),
      );
      expect((await api(app.url, '/api/v1/sinks?limit=1000')).json.data).toHaveLength(left.length);
    },
    120_000,
  );

  it('sinks add prints the sink with its secret as fields, or as JSON; refused input exits 2 on stderr', async () => {
    const added = await cli(['sinks', 'add', '--url', 'http://127.0.0.1:9/added', '--from', 'now'], viaApi);
    ok(added);
    const secret = /^secret:\s+(whsec_\S+) {3}\(shown only now: keep it\)$/m.exec(added.stdout)?.[1];
    expect(secret).toMatch(/^whsec_/);
    const id = /^id:\s+(\S+)$/m.exec(added.stdout)![1];
    expect((await api(app.url, `/api/v1/sinks/${id}`)).json.data.url).toBe('http://127.0.0.1:9/added');
    const json = await cli(['sinks', 'add', '--url', 'http://127.0.0.1:9/json', '--from', 'now', '--json'], direct);
    ok(json);
    expect(JSON.parse(json.stdout).data).toMatchObject({ kind: 'http', url: 'http://127.0.0.1:9/json' });
    for (const env of [direct, viaApi]) {
      const refused = await cli(['sinks', 'add', '--url', 'not a url'], env);
      expect({ code: refused.code, stdout: refused.stdout, stderr: refused.stderr }).toEqual({
        code: 2,
        stdout: '',
        stderr: 'menu-sync sinks add: url must be an http(s) URL (url)\n',
      });
    }
  }, 120_000);

  it('status through MENU_SYNC_URL is the report status reads from the database; a wrong token exits 1 on stderr', async () => {
    const [fromDatabase, fromApi] = await Promise.all([
      cli(['status', '--json'], direct),
      cli(['status', '--json'], viaApi),
    ]);
    const strip = (result: CliResult) => {
      const { at, ...rest } = JSON.parse(result.stdout);
      expect(typeof at).toBe('string');
      return { code: result.code, stderr: result.stderr, report: rest };
    };
    expect(strip(fromApi)).toEqual(strip(fromDatabase));
    expect(strip(fromApi).code).toBe(0);
    const screen = await cli(['status'], viaApi);
    ok(screen);
    expect(screen.stdout).toMatch(/\nOK: nothing needs attention\n$/);
    const wrong = await cli(['status'], { ...viaApi, MENU_SYNC_TOKEN: 'wrong' });
    expect({ code: wrong.code, stdout: wrong.stdout, stderr: wrong.stderr }).toEqual({
      code: 1,
      stdout: '',
      stderr: `menu-sync status: cannot read ${app.url}: The bearer token is not valid.\n`,
    });
  }, 120_000);

  it('migrate needs only DATABASE_URL: it migrates a fresh database, then has nothing to do', async () => {
    const name = `menu_sync_migrate_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: TEST_SERVER_URL });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${name}`);
      const url = new URL(TEST_SERVER_URL);
      url.pathname = `/${name}`;
      const first = await cli(['migrate'], { DATABASE_URL: url.toString() });
      expect({ code: first.code, stdout: first.stdout, run: describeRun(first) }).toMatchObject({
        code: 0,
        stdout: '',
      });
      // Each migration's line and the count. Compared as sets: the loggers' lines may reach stderr
      // in any order (a first line came last in one CI run); the order applied is TypeORM's.
      const messages = first.stderr
        .trim()
        .split('\n')
        .map((line) => String(JSON.parse(line).msg));
      expect({
        each: messages.filter((msg) => /^applied [A-Za-z]+\d{13}$/.test(msg)).sort(),
        count: messages.filter((msg) => /^applied \d+ migration\(s\)$/.test(msg)),
      }).toEqual({
        each: MIGRATIONS.map((migration) => `applied ${migration.name}`).sort(),
        count: [`applied ${MIGRATIONS.length} migration(s)`],
      });
      const again = await cli(['migrate'], { DATABASE_URL: url.toString() });
      expect([again.code, JSON.parse(again.stderr.trim()).msg]).toEqual([0, 'no pending migrations']);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  }, 120_000);
});

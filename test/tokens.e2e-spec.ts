import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { sqlQuery } from './support/change-log-factory.js';
import { describeRun, runCli } from './support/cli.js';
import { DaemonProcess } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import { Answer, api, API_TOKEN, expectFieldProblem, RunningDaemon, startDaemon } from './support/http.js';

type Json = any;

/**
 * docs/reference.md §12 (Tokens in the database): tokens made by the API or the CLI, kept as
 * digests, each authenticating with its role (and owners) in every process on the database; a
 * revoked or expired one refused everywhere within 5 s; admin-only management; the secret shown once.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SECRET = /^mst_[A-Za-z0-9_-]{43}$/;

function post(url: string, body: unknown, token: string | null = API_TOKEN): Promise<Answer> {
  return api(url, '/api/v1/tokens', token, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** Every row of every table of the database, as PostgreSQL's text of the row. */
async function everyRow(databaseUrl: string): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const tables = await client.query<{ name: string }>(
      `SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) AS name FROM pg_tables
        WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`,
    );
    const texts: string[] = [];
    for (const { name } of tables.rows) {
      const rows = await client.query<{ row: string }>(`SELECT t::text AS row FROM ${name} t`);
      texts.push(`${name}\n${rows.rows.map((r) => r.row).join('\n')}`);
    }
    return texts.join('\n');
  } finally {
    await client.end();
  }
}

describe('API tokens kept in the database (docs/reference.md §12)', () => {
  let app: RunningDaemon;
  /** A second process on the same database, with no API_TOKENS of its own. */
  let other: DaemonProcess;
  let dir: string;
  /** Every secret made here, and every answer given after its creation. */
  const secrets: string[] = [];
  const answers: string[] = [];
  const made: Record<string, Json> = {};

  async function call(url: string, route: string, token: string | null, init: RequestInit = {}): Promise<Answer> {
    const answer = await api(url, route, token, init);
    answers.push(answer.text);
    return answer;
  }

  async function make(body: Json): Promise<Json> {
    const created = await post(app.url, body);
    expect(created.status).toBe(201);
    secrets.push(created.json.token);
    return created.json;
  }

  const whoami = async (url: string, token: string | null) => {
    const answer = await call(url, '/api/v1/whoami', token);
    return answer.status === 200 ? answer.json : answer.status;
  };

  beforeAll(async () => {
    app = await startDaemon();
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-tokens-'));
    const { PORT: _port, DATA_DIR: _dataDir, ...env } = app.process.env;
    other = await DaemonProcess.start({ cwd: dir, env: { ...env, DATA_DIR: dir, API_TOKENS: '', ROLES: 'api' } });
  }, 180_000);

  afterAll(async () => {
    other?.kill('SIGTERM');
    await other?.waitForExit(15000);
    await app?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('leaves a process without API_TOKENS to loopback clients until a token is stored, then asks for one', async () => {
    expect(await whoami(other.url, null)).toEqual({ role: 'admin', owner_ids: null });
    made.admin = await make({ name: 'deploy bot', role: 'admin' });
    await eventually(async () => expect(await whoami(other.url, null)).toBe(401), 5000, 50);
    expect(await whoami(other.url, made.admin.token)).toEqual({ role: 'admin', owner_ids: null });
  });

  it('answers a creation with exactly the token, its secret shown once', async () => {
    const expiresAt = new Date(Date.now() + 3600_000).toISOString();
    made.read = await make({ name: 'storefront', role: 'read', expires_at: expiresAt });
    expect(made.read).toEqual({
      id: expect.stringMatching(UUID),
      name: 'storefront',
      role: 'read',
      owner_ids: null,
      expires_at: expiresAt,
      created_at: expect.stringMatching(INSTANT),
      last_used_at: null,
      token: expect.stringMatching(SECRET),
    });
    expect(Date.parse(made.read.created_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(made.admin).toMatchObject({ name: 'deploy bot', role: 'admin', owner_ids: null, expires_at: null });
    made.scoped = await make({ name: 'one store', role: 'read', owner_ids: ['owner-a', 'owner-b'] });
    expect(made.scoped.owner_ids).toEqual(['owner-a', 'owner-b']);
    expect(new Set(secrets).size).toBe(secrets.length);
  });

  it('authenticates each token with its role and owners, in both processes', async () => {
    for (const url of [app.url, other.url]) {
      await eventually(async () => expect(await whoami(url, made.scoped.token)).not.toBe(401), 5000, 50);
      expect(await whoami(url, made.admin.token)).toEqual({ role: 'admin', owner_ids: null });
      expect(await whoami(url, made.read.token)).toEqual({ role: 'read', owner_ids: null });
      expect(await whoami(url, made.scoped.token)).toEqual({ role: 'read', owner_ids: ['owner-a', 'owner-b'] });
      expect(await whoami(url, `${made.read.token.slice(0, -1)}x`)).toBe(401);
    }
    expect(await whoami(app.url, API_TOKEN)).toEqual({ role: 'admin', owner_ids: null });
    expect((await call(app.url, '/api/v1/products', made.read.token)).status).toBe(200);
    // A stored admin token manages tokens as an API_TOKENS one does.
    expect((await call(app.url, '/api/v1/tokens', made.admin.token)).status).toBe(200);
  });

  it('lists the tokens oldest first, a page at a time, never with a secret', async () => {
    const all = await call(app.url, '/api/v1/tokens', API_TOKEN);
    expect(all.status).toBe(200);
    expect(all.json.next_cursor).toBeNull();
    const { token: _a, ...admin } = made.admin;
    const { token: _r, ...read } = made.read;
    const { token: _s, ...scoped } = made.scoped;
    expect(all.json.data.map((token: Json) => ({ ...token, last_used_at: null }))).toEqual([admin, read, scoped]);
    expect(all.json.data.every((token: Json) => !('token' in token))).toBe(true);
    const first = await call(app.url, '/api/v1/tokens?limit=2', API_TOKEN);
    expect(first.json.data.map((token: Json) => token.id)).toEqual([admin.id, read.id]);
    const second = await call(app.url, `/api/v1/tokens?limit=2&after=${first.json.next_cursor}`, API_TOKEN);
    expect({ ids: second.json.data.map((token: Json) => token.id), next: second.json.next_cursor }).toEqual({
      ids: [scoped.id],
      next: null,
    });
    expectFieldProblem(await call(app.url, '/api/v1/tokens?after=nonsense', API_TOKEN), 400, 'after');
    expectFieldProblem(await call(app.url, '/api/v1/tokens?limit=0', API_TOKEN), 400, 'limit');
  });

  it('notes last_used_at (off the request, at most once a minute)', async () => {
    await eventually(
      async () => {
        const listed = (await call(app.url, '/api/v1/tokens', API_TOKEN)).json.data;
        const read = listed.find((token: Json) => token.id === made.read.id);
        expect(read.last_used_at).toMatch(INSTANT);
      },
      5000,
      100,
    );
  });

  it('refuses a bad creation with a problem naming the field, creating nothing', async () => {
    const before = (await call(app.url, '/api/v1/tokens', API_TOKEN)).json.data.length;
    const cases: Array<[unknown, number, string]> = [
      [{ role: 'read' }, 400, 'name'],
      [{ name: '   ', role: 'read' }, 400, 'name'],
      [{ name: 7, role: 'read' }, 400, 'name'],
      [{ name: 'x' }, 400, 'role'],
      [{ name: 'x', role: 'owner' }, 400, 'role'],
      [{ name: 'x', role: 'admin', owner_ids: ['owner-a'] }, 400, 'owner_ids'],
      [{ name: 'x', role: 'read', owner_ids: [] }, 400, 'owner_ids'],
      [{ name: 'x', role: 'read', owner_ids: ['ok', 3] }, 400, 'owner_ids'],
      [{ name: 'x', role: 'read', expires_at: 'next tuesday' }, 400, 'expires_at'],
      [{ name: 'x', role: 'read', expires_at: '2030-02-30T00:00:00Z' }, 400, 'expires_at'],
      [{ name: 'x', role: 'read', expires_at: '2001-01-01T00:00:00Z' }, 400, 'expires_at'],
      [{ name: 'x', role: 'read', scope: 'all' }, 400, 'scope'],
      [{ name: 'x', role: 'read', token: 'mst_chosen-by-the-client-0000000000000000000' }, 400, 'token'],
      ['{"name": "x", "role": ', 400, 'body'],
    ];
    for (const [body, status, field] of cases) {
      const answer = await post(app.url, body);
      answers.push(answer.text);
      expect({ body, status: answer.status }).toEqual({ body, status });
      expectFieldProblem(answer, status, field);
    }
    expect((await call(app.url, '/api/v1/tokens', API_TOKEN)).json.data).toHaveLength(before);
  });

  it('gives a read token 403 on every /tokens route, and 404 for an unknown id', async () => {
    for (const token of [made.read.token, made.scoped.token]) {
      const refused = [
        await post(app.url, { name: 'mine', role: 'admin' }, token),
        await call(app.url, '/api/v1/tokens', token),
        await call(app.url, `/api/v1/tokens/${made.admin.id}`, token, { method: 'DELETE' }),
      ];
      expect(refused.map((answer) => [answer.status, answer.headers.get('content-type')])).toEqual(
        refused.map(() => [403, expect.stringMatching(/^application\/problem\+json/)]),
      );
    }
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-an-id']) {
      const unknown = await call(app.url, `/api/v1/tokens/${id}`, API_TOKEN, { method: 'DELETE' });
      expect({ status: unknown.status, type: unknown.headers.get('content-type') }).toEqual({
        status: 404,
        type: expect.stringMatching(/^application\/problem\+json/),
      });
    }
    expect((await call(app.url, '/api/v1/tokens', API_TOKEN)).json.data).toHaveLength(3);
  });

  it('refuses a revoked token in both processes within 5 s', async () => {
    const doomed = await make({ name: 'leaked', role: 'read' });
    await eventually(async () => expect(await whoami(other.url, doomed.token)).toMatchObject({ role: 'read' }));
    const revoked = await call(app.url, `/api/v1/tokens/${doomed.id}`, API_TOKEN, { method: 'DELETE' });
    const at = Date.now();
    expect({ status: revoked.status, body: revoked.text }).toEqual({ status: 204, body: '' });
    const refusedAfter = await Promise.all(
      [app.url, other.url].map(async (url) => {
        await eventually(async () => expect(await whoami(url, doomed.token)).toBe(401), 5000, 25);
        return Date.now() - at;
      }),
    );
    expect(refusedAfter.every((ms) => ms < 5000)).toBe(true);
    expect(await whoami(other.url, made.read.token)).toMatchObject({ role: 'read' });
    // Both writes are in the audit log, by the API_TOKENS entry that made them, never with a secret.
    const audit = (await call(app.url, '/api/v1/audit?limit=1000', API_TOKEN)).json.data as Json[];
    const ofDoomed = audit.filter((entry) => entry.target === doomed.id);
    expect(ofDoomed.map(({ action, token, remote_address }) => ({ action, token, remote_address }))).toEqual([
      {
        action: 'token.revoked',
        token: { id: 'api_tokens:1', name: 'API_TOKENS entry 1' },
        remote_address: '127.0.0.1',
      },
      {
        action: 'token.created',
        token: { id: 'api_tokens:1', name: 'API_TOKENS entry 1' },
        remote_address: '127.0.0.1',
      },
    ]);
  });

  it('refuses a revoked token within 5 s when the notification is lost (the poll)', async () => {
    const doomed = await make({ name: 'leaked while deaf', role: 'admin' });
    for (const url of [app.url, other.url])
      await eventually(async () => expect(await whoami(url, doomed.token)).toMatchObject({ role: 'admin' }));
    const terminated = await sqlQuery(
      app.database.url,
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'menu-sync listen'`,
    );
    expect(terminated.length).toBeGreaterThanOrEqual(2);
    await sqlQuery(app.database.url, `DELETE FROM api_tokens WHERE id = $1`, [doomed.id]);
    const at = Date.now();
    const refusedAfter = await Promise.all(
      [app.url, other.url].map(async (url) => {
        await eventually(async () => expect(await whoami(url, doomed.token)).toBe(401), 5000, 25);
        return Date.now() - at;
      }),
    );
    expect(refusedAfter.every((ms) => ms < 5000)).toBe(true);
  });

  it('refuses an expired token in both processes from its expires_at on', async () => {
    const expiresAt = Date.now() + 3000;
    const brief = await make({ name: 'brief', role: 'admin', expires_at: new Date(expiresAt).toISOString() });
    for (const url of [app.url, other.url])
      await eventually(async () => expect(await whoami(url, brief.token)).toMatchObject({ role: 'admin' }));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt - Date.now())));
    const refusedAfter = await Promise.all(
      [app.url, other.url].map(async (url) => {
        await eventually(async () => expect(await whoami(url, brief.token)).toBe(401), 5000, 25);
        return Date.now() - expiresAt;
      }),
    );
    expect(refusedAfter.every((ms) => ms < 5000)).toBe(true);
    // Still listed (expired, not deleted), so the loopback rule does not come back.
    expect((await call(app.url, '/api/v1/tokens', API_TOKEN)).json.data.map((t: Json) => t.name)).toContain('brief');
  });

  it('manages tokens with menu-sync tokens add|list|revoke, exit codes 0, 1 and 2', async () => {
    const env = { ...app.process.env, LOG_LEVEL: 'warn' };
    const added = await runCli(
      ['tokens', 'add', '--name', 'cli reader', '--role', 'read', '--owner-ids', 'owner-a, owner-c', '--json'],
      env,
      undefined,
      120000,
    );
    expect(added.code).toBe(0);
    const token = JSON.parse(added.stdout);
    secrets.push(token.token);
    expect(token).toMatchObject({ name: 'cli reader', role: 'read', owner_ids: ['owner-a', 'owner-c'] });
    expect(token.token).toMatch(SECRET);
    await eventually(async () =>
      expect(await whoami(other.url, token.token)).toEqual({ role: 'read', owner_ids: ['owner-a', 'owner-c'] }),
    );

    const listed = await runCli(['tokens', 'list', '--json'], env, undefined, 120000);
    expect(listed.code).toBe(0);
    const names = JSON.parse(listed.stdout).data.map((t: Json) => t.name);
    expect(names).toEqual(['deploy bot', 'storefront', 'one store', 'brief', 'cli reader']);
    expect(listed.stdout).not.toContain('mst_');

    const failures: Array<[string[], number]> = [
      [['tokens', 'add', '--role', 'read'], 2],
      [['tokens', 'add', '--name', 'x', '--role', 'admin', '--owner-ids', 'a'], 2],
      [['tokens', 'add', '--name', 'x', '--role', 'read', '--expires-at', 'soon'], 2],
      [['tokens', 'revoke', 'ffffffff'], 1],
      [['tokens', 'revoke', 'not an id'], 1],
      [['tokens', 'frobnicate'], 2],
    ];
    const results = await Promise.all(failures.map(([args]) => runCli(args, env, undefined, 180000)));
    expect(results.map((result, index) => ({ args: failures[index][0], code: result.code }))).toEqual(
      failures.map(([args, code]) => ({ args, code })),
    );
    expect(results[1].stderr).toContain('owner_ids');

    const revoked = await runCli(['tokens', 'revoke', token.id.slice(0, 8)], env, undefined, 120000);
    expect(revoked.code).toBe(0);
    expect([revoked.stdout, revoked.stderr]).toEqual([`revoked ${token.id}\n`, '']);
    await eventually(async () => expect(await whoami(other.url, token.token)).toBe(401), 5000, 25);
    const after = await runCli(['tokens', 'list', '--json'], env, undefined, 120000);
    expect(JSON.parse(after.stdout).data.map((t: Json) => t.name)).not.toContain('cli reader');
    answers.push(listed.stdout, after.stdout, revoked.stdout, revoked.stderr, ...results.map(describeRun));
  }, 400_000);

  it('keeps every secret out of the database, the logs and every later answer', async () => {
    expect(secrets.length).toBeGreaterThanOrEqual(6);
    const rows = await everyRow(app.database.url);
    expect(rows).toContain('deploy bot');
    const logs = app.process.logs + other.logs;
    expect(logs.length).toBeGreaterThan(1000);
    const later = answers.join('\n');
    for (const secret of secrets) {
      const body = secret.slice('mst_'.length);
      expect({
        secret,
        inRows: rows.includes(body),
        inLogs: logs.includes(body),
        inAnswers: later.includes(body),
      }).toEqual({
        secret,
        inRows: false,
        inLogs: false,
        inAnswers: false,
      });
    }
  });
});

import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DaemonProcess, MAIN_JS, ROOT_DIR, stopLeftovers } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import { createPostgresTarget, PostgresTarget } from './support/postgres-target.js';
import { cliCommands, hostsOf, placeholdersOf, ReadmeCommand, sectionCommands } from './support/readme-commands.js';
import { SinkReceiver } from './support/sink-receiver.js';

type Json = any;

/**
 * Docs that run (issue 41): every command of the README's quick start and sinks section, taken
 * from its fenced blocks, run by bash as written against a daemon started as the README says
 * (`npm start`: the built daemon with no configuration; `VAR=… npm start`: again with those
 * variables). A command that exits non-zero or gets a 4XX or 5XX fails the test, naming its README
 * line. Only loopback is ever reached: `localhost:3000` is the daemon's port, the README's other
 * URLs are rewritten to a receiver and a database the test runs (REWRITES), and any other host
 * fails the test before the command runs. `<…>` is filled from what the daemon answered before.
 */

const README = readFileSync(path.join(ROOT_DIR, 'README.md'), 'utf8');
const DEMO_OWNER = '4001';
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
/** How long a streaming command (`curl -N`) is read before it is cut. */
const STREAM_SECONDS = 3;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The final status of each HTTP request curl made, in order. */
  statuses: number[];
  contentTypes: string[];
}

/** bash as the reader's shell: curl fails on a 4XX/5XX (its answer still shown) and records each status; menu-sync is the built CLI. */
const PRELUDE = `
set -o pipefail
curl() {
  local headers="$DOCS_HEADERS/$(date +%s%N).txt" limit=()
  for argument in "$@"; do [ "$argument" = -N ] && limit=(--max-time ${STREAM_SECONDS}); done
  command curl --noproxy '*' --fail-with-body --show-error -D "$headers" "\${limit[@]}" "$@"
  local code=$?
  if [ $code -eq 28 ] && [ \${#limit[@]} -gt 0 ] && grep -q '^HTTP/[0-9.]* 200' "$headers"; then return 0; fi
  return $code
}
menu-sync() { "$DOCS_NODE" "$DOCS_MAIN_JS" "$@"; }
npx() {
  if [ "$1" = menu-sync ]; then shift; menu-sync "$@"; else echo "npx $1: not run by this test" >&2; return 127; fi
}
`;

describe("the README's quick start and sinks, run as written (issue 41)", () => {
  const quickStart = sectionCommands(README, 'Quick start');
  const sinks = sectionCommands(README, 'Sinks');
  let dir: string;
  let daemon: DaemonProcess | undefined;
  let receiver: SinkReceiver;
  let target: PostgresTarget;
  /** README URLs that are not the daemon's, and the loopback targets this test runs instead. */
  let rewrites: Map<string, string>;
  const used = new Set<string>();
  /** `<id>`: the sink the README's last command made. */
  let sinkId: string | undefined;

  const api = async (pathname: string) => {
    const response = await fetch(`${daemon!.url}${pathname}`);
    return { status: response.status, json: (await response.json().catch(() => undefined)) as Json };
  };

  /** The sandbox's connection of this start (a restart leaves the earlier ones `reauthorization_required`). */
  const activeConnection = async (): Promise<Json> =>
    (await api('/api/v1/connections')).json.data.find((connection: Json) => connection.state === 'active');

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-readme-'));
    await chmod(dir, 0o755);
    receiver = await new SinkReceiver().start();
    target = await createPostgresTarget();
    rewrites = new Map([
      ['https://shop.example/hooks/menu', receiver.url],
      ['postgres://catalogue:<password>@127.0.0.1:5432/shop', target.url],
    ]);
  });

  afterAll(async () => {
    await DaemonProcess.killAll('SIGKILL');
    await receiver?.close();
    await target?.drop();
    if (dir === undefined) return;
    await stopLeftovers(dir);
    await rm(dir, { recursive: true, force: true });
  });

  /** `npm start`: (re)starts the daemon in the same directory, with the README's variables; then waits for the sandbox's menu. */
  async function start(env: Record<string, string>): Promise<void> {
    if (daemon !== undefined) {
      daemon.kill('SIGTERM');
      expect(await daemon.waitForExit(15_000)).toEqual({ code: 0, signal: null });
    }
    daemon = await DaemonProcess.start({ cwd: dir, env: { HOST: '127.0.0.1', ...env }, readyTimeoutMs: 90_000 });
    await eventually(
      async () => {
        const connection = await activeConnection();
        expect(connection).toMatchObject({ state: 'active', owner_id: DEMO_OWNER });
        const state = (await (await fetch(`${connection.base_url}/_emulator/state`)).json()) as Json;
        const menu = (await api(`/api/v1/menu?owner_id=${DEMO_OWNER}`)).json;
        expect(menu.products.map((p: Json) => p.id).sort()).toEqual(state.products.map((p: Json) => p.id).sort());
      },
      60_000,
      200,
    );
  }

  /** The command with the daemon's address, the rewritten URLs and the placeholders filled. */
  async function prepared(text: string): Promise<string> {
    let command = text.replaceAll('localhost:3000', daemon!.url.replace('http://', ''));
    for (const [from, to] of rewrites) {
      if (!command.includes(from)) continue;
      command = command.replaceAll(from, to);
      used.add(from);
    }
    for (const name of new Set(placeholdersOf(command))) {
      command = command.replaceAll(`<${name}>`, await valueOf(name, text));
    }
    const outside = hostsOf(command).filter((host) => !LOOPBACK.has(host));
    if (outside.length > 0) throw new Error(`README: "${text}" reaches ${outside.join(', ')}, not loopback`);
    return command;
  }

  async function valueOf(name: string, text: string): Promise<string> {
    if (name === 'emulator') return (await activeConnection()).base_url;
    if (name === 'id' && sinkId !== undefined) return sinkId;
    if (name === 'cursor') return (await api(`/api/v1/menu?owner_id=${DEMO_OWNER}`)).json.changes_cursor;
    throw new Error(`README: "${text}" has a placeholder <${name}> this test cannot fill`);
  }

  async function bash(command: string): Promise<Run> {
    const headers = await mkdtemp(path.join(tmpdir(), 'menu-sync-readme-headers-'));
    try {
      const child = spawn('bash', ['-c', `${PRELUDE}\n${command}`], {
        cwd: dir,
        env: { ...daemon!.env, DOCS_HEADERS: headers, DOCS_NODE: process.execPath, DOCS_MAIN_JS: MAIN_JS },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      clearTimeout(timer);
      const statuses: number[] = [];
      const contentTypes: string[] = [];
      for (const file of (await readdir(headers)).sort()) {
        const text = await readFile(path.join(headers, file), 'utf8');
        const responses = text.split(/\r?\n\r?\n/).filter((part) => /^HTTP\//.test(part));
        const last = responses.at(-1) ?? '';
        statuses.push(Number(/^HTTP\/[\d.]+ (\d{3})/.exec(last)?.[1] ?? 0));
        contentTypes.push(/^content-type:\s*(.*)$/im.exec(last)?.[1].trim() ?? '');
      }
      return { code, stdout, stderr, statuses, contentTypes };
    } finally {
      await rm(headers, { recursive: true, force: true });
    }
  }

  /** Runs one README command (a synopsis: each command it shows) and checks what the README says of it. */
  async function run(readme: ReadmeCommand): Promise<void> {
    if (readme.kind === 'suite') return; // `npm test`: the suite this test is part of
    if (readme.kind === 'start') return start(readme.env);
    for (const text of readme.kind === 'cli' ? cliCommands(readme.text) : [readme.text]) {
      const command = await prepared(text);
      const result = await bash(command);
      // The target database's password stays out of a failure's message.
      const where = [encodeURIComponent(target.password), target.password].reduce(
        (text, secret) => text.split(secret).join('***'),
        `README line ${readme.line}: ${text}\n$ ${command}\n${result.stdout.slice(-4000)}\n${result.stderr.slice(-4000)}`,
      );
      const failed = result.statuses.filter((status) => status < 200 || status >= 300);
      expect({ where, code: result.code, failed }).toEqual({ where, code: 0, failed: [] });
      if (readme.kind === 'curl') expect({ where, requests: result.statuses.length }).toEqual({ where, requests: 1 });
      if (readme.status !== null)
        expect({ where, status: result.statuses.at(-1) }).toEqual({ where, status: readme.status });
      if (readme.prints !== null)
        expect({ where, printed: result.stdout.trim() }).toEqual({ where, printed: readme.prints });
      if (/\s-N\s/.test(` ${text} `)) {
        expect({ where, type: result.contentTypes.at(-1) }).toEqual({
          where,
          type: expect.stringMatching(/^text\/event-stream/),
        });
        expect({ where, streamed: /^event: ?change$/m.test(result.stdout) }).toEqual({ where, streamed: true });
      }
      await afterSinkMade(result.stdout);
    }
  }

  /** A command that made a sink: `<id>` is it from now on, and it delivers as the README says. */
  async function afterSinkMade(stdout: string): Promise<void> {
    let answer: Json;
    try {
      answer = JSON.parse(stdout);
    } catch {
      return;
    }
    const sink = answer?.data;
    if (typeof sink?.id !== 'string' || typeof sink?.kind !== 'string') return;
    sinkId = sink.id;
    if (sink.kind === 'http') {
      receiver.secrets.push(sink.secret);
      // Signed as Standard Webhooks say: the receiver verifies every batch with the secret shown once.
      await eventually(async () => expect(receiver.acknowledgedChanges.length).toBeGreaterThan(0), 30_000, 100);
    }
    if (sink.kind === 'postgres') {
      await eventually(
        async () => {
          const [attempt] = (await api(`/api/v1/sinks/${sink.id}/attempts?limit=1`)).json.data;
          expect(attempt).toMatchObject({ outcome: 'ok', status: 'committed' });
          const live = (await api(`/api/v1/products?owner_id=${DEMO_OWNER}&limit=1000`)).json.data;
          const rows = await target.admin.query(`SELECT id FROM menu_sync.products WHERE owner_id = $1`, [DEMO_OWNER]);
          expect(rows.rows.map((row) => row.id).sort()).toEqual(live.map((product: Json) => product.id).sort());
        },
        30_000,
        200,
      );
    }
  }

  it('finds the commands: the quick start starts the daemon first; the sinks section makes an http and a postgres sink', () => {
    expect(quickStart[0]).toMatchObject({ kind: 'start', text: 'npm ci && npm start', env: {} });
    expect(quickStart.filter((command) => command.kind === 'curl').length).toBeGreaterThanOrEqual(4);
    expect(sinks[0]).toMatchObject({ kind: 'start', env: { SINK_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128' } });
    const made = sinks.map((command) => /"kind":"(\w+)"/.exec(command.text)?.[1]).filter(Boolean);
    expect(made).toEqual(['http', 'postgres']);
    const cli = sinks.filter((command) => command.kind === 'cli').flatMap((command) => cliCommands(command.text));
    for (const shown of [
      / sinks list$/,
      / sinks replay <id>$/,
      / sinks replay <id> --from start$/,
      / sinks remove <id>$/,
    ])
      expect(cli).toContainEqual(expect.stringMatching(shown));
  });

  it('runs the quick start: every command exits 0 and every request is answered 2XX; Soup reaches data/catalogue.json', async () => {
    for (const command of quickStart) await run(command);
    await eventually(
      async () => expect(await readFile(path.join(dir, 'data', 'catalogue.json'), 'utf8')).toContain('"Soup"'),
      20_000,
      200,
    );
  }, 240_000);

  it('runs the sinks section: the sinks are made, deliver, and are listed, replayed and removed as written', async () => {
    for (const command of sinks) await run(command);
    expect([...used].sort()).toEqual([...rewrites.keys()].sort());
  }, 240_000);
});

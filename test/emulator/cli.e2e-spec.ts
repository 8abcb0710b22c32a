import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CliProcess, describeRun, runCli, spawnCli } from '../support/cli.js';
import { freePort } from '../support/daemon-process.js';
import { eventually } from '../support/eventually.js';

/**
 * `menu-sync emulator` as people at a terminal use it (docs/reference.md §9): the built CLI starts the
 * emulator with its flags, `trigger` and `resend` talk to it, bad usage exits 2, SIGTERM stops it.
 */
describe('menu-sync emulator (the command line)', () => {
  let dir: string;
  let emulator: CliProcess;
  let url: string;
  // No DATABASE_URL: the emulator needs no database, so nothing embedded may start either.
  const env = () => ({ DATA_DIR: dir, OAUTH_CLIENT_ID: 'cli-client', OAUTH_CLIENT_SECRET: 'cli-secret-value' });
  const json = async (pathname: string, init?: RequestInit) =>
    (await fetch(`${url}${pathname}`, init)).json() as Promise<any>;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-emulator-cli-'));
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    emulator = spawnCli(
      ['emulator', '--port', String(port), '--seed', '5', '--retry-schedule-ms', '10,10,10,10,10', '--page-size', '7'],
      env(),
      dir,
    );
    await eventually(async () => expect((await fetch(`${url}/_emulator/state`)).status).toBe(200), 30_000, 100);
  });

  afterAll(async () => {
    emulator?.kill('SIGKILL');
    await CliProcess.killAll();
    await rm(dir, { recursive: true, force: true });
  });

  it('serves the seeded demo, logs its address, and knows the configured application', async () => {
    expect((await json('/_emulator/state')).products).toHaveLength(30);
    expect(emulator.stdout).toContain(`emulator listening on ${url}`);
    const page = await fetch(
      `${url}/oauth/authorize?client_id=cli-client&redirect_uri=urn:ietf:wg:oauth:2.0:oob&response_type=code&scope=read_menu`,
    );
    expect(page.status).toBe(200);
    const unknown = await fetch(
      `${url}/oauth/authorize?client_id=demo-client&redirect_uri=urn:ietf:wg:oauth:2.0:oob&response_type=code&scope=read_menu`,
    );
    expect(unknown.status).toBe(400);
    // The client secret never reaches the log.
    expect(emulator.stdout + emulator.stderr).not.toContain('cli-secret-value');
  });

  it('trigger makes the change that produces the event; resend delivers it again', async () => {
    const triggered = await runCli(['emulator', 'trigger', 'product.updated', '--id', '3', '--url', url], env(), dir);
    expect(triggered.code).toBe(0);
    const answer = JSON.parse(triggered.stdout);
    expect(answer.subject).toEqual({ type: 'product', id: '3' });
    const events = (await json('/_emulator/events')).data;
    expect(events.at(-1)).toMatchObject({ event_id: answer.event_ids[0], event_type: 'product.updated' });

    const resent = await runCli(['emulator', 'resend', answer.event_ids[0], '--url', url], env(), dir);
    expect({ code: resent.code, out: JSON.parse(resent.stdout) }).toEqual({ code: 0, out: { deliveries: 0 } });
    const missing = await runCli(['emulator', 'resend', '999', '--url', url], env(), dir);
    expect(missing.code).toBe(1);
  });

  it('refuses an unknown event (exit 1, the reason on stderr) and bad usage (exit 2)', async () => {
    const unknown = await runCli(['emulator', 'trigger', 'product.exploded', '--url', url], env(), dir);
    expect({ code: unknown.code, stderr: unknown.stderr }).toEqual({
      code: 1,
      stderr: expect.stringContaining('event_type'),
    });
    for (const args of [
      ['emulator', '--port', 'abc'],
      ['emulator', '--retry-schedule-ms', '1,2'],
      ['emulator', 'trigger'],
      ['emulator', '--bogus'],
    ]) {
      const result = await runCli(args, env(), dir);
      expect({ args, code: result.code }).toEqual({ args, code: 2 });
    }
    const offline = await runCli(['emulator', 'trigger', 'product.updated', '--url', 'http://127.0.0.1:9'], env(), dir);
    expect({ code: offline.code, stderr: offline.stderr }).toEqual({
      code: 1,
      stderr: expect.stringContaining('no emulator answers'),
    });
  });

  it('stops on SIGTERM with exit 0', async () => {
    emulator.kill('SIGTERM');
    const result = await emulator.wait(10_000);
    expect({ code: result.code, run: describeRun(result) }).toEqual({ code: 0, run: expect.any(String) });
  });
});

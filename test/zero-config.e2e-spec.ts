import { randomInt } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  DaemonProcess,
  expectCleanStop,
  postmasters,
  processesMentioning,
  stopLeftovers,
} from './support/daemon-process.js';
import { webhookEvent } from './support/webhook-events.js';

/**
 * docs/reference.md §1 and §10: `menu-sync serve` with no configuration at all comes up on an embedded
 * PostgreSQL under ./data, accepts deliveries on the local webhook key, stops its PostgreSQL on
 * SIGTERM, keeps its data across restarts and recovers from a SIGKILL that orphaned its PostgreSQL.
 */

/** The first start runs initdb. */
const FIRST_READY_MS = 90000;

interface Answer {
  status: number;
  json: Record<string, unknown>;
}

async function call(url: string, init?: RequestInit): Promise<Answer> {
  const response = await fetch(url, init);
  const text = await response.text();
  return { status: response.status, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

function postEvent(daemon: DaemonProcess, key: string, body: string): Promise<Answer> {
  return call(`${daemon.url}/webhooks/${key}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
}

describe('zero configuration: `menu-sync serve` with nothing set', () => {
  let dir: string;
  let key: string;
  const subjectId = String(randomInt(100_000_000, 999_999_999));
  const event = webhookEvent({ subjectId, eventType: 'product.updated' });
  const eventId = (event.data as { id: string }).id;
  const body = JSON.stringify(event);
  let position: number | undefined;

  /**
   * cwd is a fresh directory, so DATA_DIR defaults to ./data in it and no .env is found. PORT is
   * the only variable set (besides PATH and HOME, which the helper always passes): it picks a free
   * port so the test never clashes with something on the default 3000, e.g. in CI.
   */
  const start = (readyTimeoutMs = 60000) => DaemonProcess.start({ cwd: dir, readyTimeoutMs });

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-zero-config-'));
    // mkdtemp creates the directory 0700. Run as root, the embedded PostgreSQL runs as the
    // `postgres` user, which must be able to traverse this directory to reach ./data/postgres.
    await chmod(dir, 0o755);
  });

  afterAll(async () => {
    await DaemonProcess.killAll('SIGKILL');
    if (dir === undefined) return;
    await stopLeftovers(dir);
    await rm(dir, { recursive: true, force: true });
  });

  it(
    'comes up on an embedded PostgreSQL under ./data, accepts a delivery on the local key, and stops it on SIGTERM',
    async () => {
      const daemon = await start(FIRST_READY_MS);
      expect(Object.keys(daemon.env).sort()).toEqual(['HOME', 'PATH', 'PORT']);
      expect(daemon.logs).toMatch(/embedded PostgreSQL/);

      const keyFile = path.join(dir, 'data', 'webhook.key');
      expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
      key = (await readFile(keyFile, 'utf8')).trim();
      expect(key.length).toBeGreaterThanOrEqual(43);

      const accepted = await postEvent(daemon, key, body);
      expect(accepted).toEqual({
        status: 202,
        json: { status: 'accepted', position: expect.any(Number), event_id: eventId },
      });
      position = accepted.json.position as number;

      // Loopback client, API_TOKENS unset: no token needed.
      const listed = await call(`${daemon.url}/api/v1/events?subject_type=product&subject_id=${subjectId}`);
      expect(listed.status).toBe(200);
      expect(listed.json.data).toEqual([
        expect.objectContaining({ position, event_id: eventId, event_type: 'product.updated' }),
      ]);

      await expectCleanStop(daemon, dir);
    },
    FIRST_READY_MS + 30000,
  );

  it('keeps the event across a restart, and comes back after a SIGKILL that left its PostgreSQL running', async () => {
    expect(position).toBeDefined();
    let daemon = await start();
    const listed = await call(`${daemon.url}/api/v1/events?subject_type=product&subject_id=${subjectId}`);
    expect(listed.json.data).toEqual([expect.objectContaining({ position, event_id: eventId })]);
    expect(await postEvent(daemon, key, body)).toEqual({ status: 200, json: { status: 'duplicate', position } });

    daemon.kill('SIGKILL');
    expect(await daemon.waitForExit(5000)).toEqual({ code: null, signal: 'SIGKILL' });
    // The killed daemon could not stop its PostgreSQL: the postmaster is still running on ./data.
    const orphans = await processesMentioning(dir);
    expect(orphans.length).toBeGreaterThan(0);

    daemon = await start();
    const running = postmasters(await processesMentioning(dir));
    expect(running.filter((p) => orphans.some((o) => o.pid === p.pid))).toEqual([]);
    expect(running).toHaveLength(1);
    expect(await postEvent(daemon, key, body)).toEqual({ status: 200, json: { status: 'duplicate', position } });
    const second = webhookEvent({ subjectId });
    expect((await postEvent(daemon, key, JSON.stringify(second))).status).toBe(202);
    const after = await call(`${daemon.url}/api/v1/events?subject_type=product&subject_id=${subjectId}`);
    expect((after.json.data as Array<{ event_id: string }>).map((e) => e.event_id)).toEqual([
      eventId,
      (second.data as { id: string }).id,
    ]);

    await expectCleanStop(daemon, dir);
  }, 90000);

  it('refuses bad configuration with exit code 2, naming every offending variable', async () => {
    const daemon = await DaemonProcess.spawn({ cwd: dir, env: { PORT: 'abc', LOG_LEVEL: 'loud' } });
    const exit = await daemon.waitForExit(20000);
    expect({ exit, stderr: daemon.stderr }).toEqual({
      exit: { code: 2, signal: null },
      stderr: expect.stringMatching(/PORT[\s\S]*LOG_LEVEL|LOG_LEVEL[\s\S]*PORT/),
    });
  }, 30000);
});

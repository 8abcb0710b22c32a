import { createHash, randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import pg from 'pg';
import { DaemonProcess, sleep, daemonEnv } from './support/daemon-process.js';
import { createTestDatabase, TestDatabase } from './support/database.js';
import { webhookEvent } from './support/webhook-events.js';

/**
 * docs/reference.md §2 and §10 against the built daemon in a child process: a delivery answered 2XX is
 * committed before the answer, so it survives a SIGKILL at any moment, is in the log exactly once,
 * and stays a duplicate forever; SIGTERM finishes in-flight appends and exits 0 within 10 s.
 */

const WEBHOOK_KEY = `durability-${randomBytes(16).toString('hex')}`;
const SENDERS = 40;
/** Every load loop is bounded: per sender, and in time. */
const MAX_DELIVERIES_PER_SENDER = 1000;
const MAX_LOAD_MS = 15000;

/** TEST_VERBOSE=1 prints what each cycle did (counts, timings). */
const report = (line: string) => {
  if (process.env.TEST_VERBOSE) process.stderr.write(`[durability] ${line}\n`);
};

interface Sent {
  id: string;
  body: string;
}

interface Acked extends Sent {
  status: number;
  position: number;
}

interface Answer {
  status: number;
  body: string;
}

interface LoadResult {
  acked: Acked[];
  /** Answers that were not 2XX, by status. */
  refused: Map<number, number>;
  /** Requests that got no answer (connection refused or reset); each ends its sender. */
  connectionErrors: number;
}

interface Load {
  readonly acked: Acked[];
  stop(): void;
  done: Promise<LoadResult>;
}

/** One POST over the given agent: resolves with the answer, rejects on a connection error. */
function post(url: string, body: string, agent: Agent): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        timeout: 10000,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * SENDERS concurrent senders, each on its own keep-alive connection, posting distinct valid
 * events in a loop until stopped, out of budget, or a connection error (the daemon went away).
 */
function startLoad(baseUrl: string): Load {
  const url = `${baseUrl}/webhooks/${WEBHOOK_KEY}`;
  const acked: Acked[] = [];
  const refused = new Map<number, number>();
  let connectionErrors = 0;
  let stopped = false;
  const deadline = Date.now() + MAX_LOAD_MS;
  const sender = async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < MAX_DELIVERIES_PER_SENDER && !stopped && Date.now() < deadline; i++) {
        const event = webhookEvent();
        const sent = { id: (event.data as { id: string }).id, body: JSON.stringify(event) };
        let answer: Answer;
        try {
          answer = await post(url, sent.body, agent);
        } catch {
          connectionErrors++;
          return;
        }
        if (answer.status >= 200 && answer.status < 300) {
          acked.push({
            ...sent,
            status: answer.status,
            position: (JSON.parse(answer.body) as { position: number }).position,
          });
        } else {
          refused.set(answer.status, (refused.get(answer.status) ?? 0) + 1);
        }
      }
    } finally {
      agent.destroy();
    }
  };
  const done = Promise.all(Array.from({ length: SENDERS }, sender)).then(() => ({ acked, refused, connectionErrors }));
  return { acked, stop: () => (stopped = true), done };
}

/** Lets the load run for about 1–2 s and some hundreds of acknowledgements, then returns. */
async function midLoad(load: Load): Promise<void> {
  const started = Date.now();
  for (;;) {
    const elapsed = Date.now() - started;
    if ((load.acked.length >= 300 && elapsed >= 1000) || elapsed >= 2000) return;
    await sleep(10);
  }
}

/** Every acknowledged delivery is in event_log exactly once, at the position it was told, byte for byte. */
async function expectAllInLog(client: pg.Client, acked: Acked[]): Promise<void> {
  expect(new Set(acked.map((a) => a.id)).size).toBe(acked.length);
  const { rows } = await client.query<{ event_id: string; position: string; sha256: Buffer; copies: string }>(
    `SELECT event_id, position::text AS position, sha256, count(*) OVER (PARTITION BY event_id)::text AS copies
       FROM event_log WHERE event_id = ANY($1::text[])`,
    [acked.map((a) => a.id)],
  );
  const byId = new Map(rows.map((row) => [row.event_id, row]));
  const problems: string[] = [];
  for (const a of acked) {
    const row = byId.get(a.id);
    if (!row) problems.push(`${a.id}: answered ${a.status} (position ${a.position}) but not in event_log`);
    else if (row.copies !== '1') problems.push(`${a.id}: ${row.copies} copies in event_log`);
    else if (Number(row.position) !== a.position)
      problems.push(`${a.id}: answered position ${a.position}, logged at ${row.position}`);
    else if (!row.sha256.equals(createHash('sha256').update(a.body).digest()))
      problems.push(`${a.id}: stored sha256 differs`);
  }
  expect(rows).toHaveLength(acked.length);
  expect(problems.slice(0, 10)).toEqual([]);
}

/** Re-sends every acknowledged delivery (40 at a time): each must answer 200 duplicate at its original position. */
async function expectDuplicates(baseUrl: string, acked: Acked[]): Promise<void> {
  const url = `${baseUrl}/webhooks/${WEBHOOK_KEY}`;
  const queue = [...acked];
  const problems: string[] = [];
  await Promise.all(
    Array.from({ length: SENDERS }, async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
          const answer = await post(url, next.body, agent);
          const expected = JSON.stringify({ status: 'duplicate', position: next.position });
          if (answer.status !== 200 || JSON.stringify(JSON.parse(answer.body)) !== expected) {
            problems.push(`${next.id}: expected 200 ${expected}, got ${answer.status} ${answer.body.slice(0, 200)}`);
          }
        }
      } finally {
        agent.destroy();
      }
    }),
  );
  expect(problems.slice(0, 10)).toEqual([]);
}

describe('durability of acknowledged deliveries (built daemon, child process)', () => {
  let database: TestDatabase;
  let client: pg.Client;
  let env: Record<string, string>;

  beforeAll(async () => {
    database = await createTestDatabase();
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    env = daemonEnv({
      DATABASE_URL: database.url,
      WEBHOOK_KEYS: WEBHOOK_KEY,
    });
  });

  afterAll(async () => {
    await DaemonProcess.killAll('SIGKILL');
    await client?.end();
    await database?.drop();
  });

  it('keeps every 2XX delivery exactly once through three SIGKILLs under load, and answers its repeats 200 duplicate', async () => {
    const allAcked: Acked[] = [];
    let daemon = await DaemonProcess.start({ env });
    for (let cycle = 1; cycle <= 3; cycle++) {
      const load = startLoad(daemon.url);
      await midLoad(load);
      daemon.kill('SIGKILL');
      expect(await daemon.waitForExit(5000)).toEqual({ code: null, signal: 'SIGKILL' });
      load.stop();
      const result = await load.done;

      expect(result.acked.length).toBeGreaterThan(0);
      // Distinct new events: before the kill every answer is 202; after it, only connection errors.
      expect(Object.fromEntries(result.refused)).toEqual({});
      expect(result.acked.every((a) => a.status === 202)).toBe(true);
      expect(result.connectionErrors).toBeGreaterThan(0);
      report(`cycle ${cycle}: ${result.acked.length} acknowledged, ${result.connectionErrors} connection errors`);
      await expectAllInLog(client, result.acked);
      allAcked.push(...result.acked);

      daemon = await DaemonProcess.start({ env });
      await expectDuplicates(daemon.url, result.acked);
    }
    // Nothing acknowledged in an earlier cycle was lost or duplicated by later crashes.
    await expectAllInLog(client, allAcked);
    await expectDuplicates(daemon.url, allAcked.slice(0, 500));
    daemon.kill('SIGTERM');
    expect(await daemon.waitForExit(10000)).toEqual({ code: 0, signal: null });
  }, 80000);

  it('on SIGTERM under load finishes in-flight appends and exits 0 within 10 s, keeping every 2XX delivery', async () => {
    const daemon = await DaemonProcess.start({ env });
    const load = startLoad(daemon.url);
    await midLoad(load);
    const signalled = Date.now();
    daemon.kill('SIGTERM');
    const exit = await daemon.waitForExit(10000);
    const shutdownMs = Date.now() - signalled;
    load.stop();
    const result = await load.done;

    expect({ exit, logs: exit.code === 0 ? '' : daemon.logs }).toEqual({ exit: { code: 0, signal: null }, logs: '' });
    report(
      `SIGTERM: exit in ${shutdownMs} ms, ${result.acked.length} acknowledged, ` +
        `refused ${JSON.stringify(Object.fromEntries(result.refused))}, ${result.connectionErrors} connection errors`,
    );
    expect(shutdownMs).toBeLessThan(10000);
    expect(result.acked.length).toBeGreaterThan(0);
    // While closing, a delivery may be refused with 503 (not stored, retry), never anything else.
    expect([...result.refused.keys()].filter((status) => status !== 503)).toEqual([]);
    await expectAllInLog(client, result.acked);

    // And they are still duplicates for the next daemon.
    const restarted = await DaemonProcess.start({ env });
    await expectDuplicates(restarted.url, result.acked);
    restarted.kill('SIGTERM');
    expect(await restarted.waitForExit(10000)).toEqual({ code: 0, signal: null });
  }, 60000);
});

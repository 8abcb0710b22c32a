import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestDatabase, TestDatabase } from './database.js';
import { daemonEnv, DaemonProcess } from './daemon-process.js';
import { pooledUrl } from './pooler.js';

/** Secrets of the daemons started here: random, so a test can search the logs for them. */
export const WEBHOOK_KEY = `test-webhook-key-${randomBytes(16).toString('hex')}`;
export const API_TOKEN = `test-api-token-${randomBytes(16).toString('hex')}`;
/** SINK_ALLOWED_NETWORKS for daemons whose sinks deliver to receivers on loopback (the egress guard refuses it otherwise). */
export const LOOPBACK_NETWORKS = '127.0.0.0/8,::1/128';

export interface RunningDaemon {
  url: string;
  database: TestDatabase;
  process: DaemonProcess;
  close(): Promise<void>;
}

/**
 * `menu-sync serve` (the built dist/) as a child process on a fresh migrated database, ready; `env`
 * may be made from that database (e.g. DATABASE_READ_URL naming it on the replica). With
 * TEST_THROUGH_POOLER=1, DATABASE_URL names it through PgBouncer in transaction mode and
 * DATABASE_DIRECT_URL directly (issue 44: a suite run as it would run behind a pooler).
 * A child process rather than the Daemon in jest's VM: jest cannot require() the ESM-only
 * dependencies that the Swagger UI's static files plugin loads, so the in-process app cannot boot.
 */
export async function startDaemon(
  env: Record<string, string> | ((database: TestDatabase) => Record<string, string>) = {},
): Promise<RunningDaemon> {
  const database = await createTestDatabase();
  const dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-e2e-'));
  let daemon: DaemonProcess;
  try {
    daemon = await DaemonProcess.start({
      cwd: dir,
      env: daemonEnv({
        DATABASE_URL: database.url,
        DATA_DIR: dir,
        WEBHOOK_KEYS: WEBHOOK_KEY,
        API_TOKENS: API_TOKEN,
        LOG_LEVEL: 'debug',
        ...(process.env.TEST_THROUGH_POOLER
          ? { DATABASE_URL: pooledUrl(database.url), DATABASE_DIRECT_URL: database.url }
          : {}),
        ...(typeof env === 'function' ? env(database) : env),
      }),
    });
  } catch (error) {
    await database.drop();
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: daemon.url,
    database,
    process: daemon,
    close: async () => {
      daemon.kill('SIGTERM');
      await daemon.waitForExit(15000).catch(() => {
        daemon.kill('SIGKILL');
        return daemon.waitForExit();
      });
      await database.drop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** An HTTP answer, read whole. */
export interface Answer {
  status: number;
  headers: Headers;
  bytes: Buffer;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: any;
}

async function read(response: Response): Promise<Answer> {
  return answer(response.status, response.headers, Buffer.from(await response.arrayBuffer()));
}

function answer(status: number, headers: Headers, bytes: Buffer): Answer {
  const text = bytes.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, headers, bytes, text, json };
}

export interface DeliveryOptions {
  key?: string;
  /** null sends no Content-Type at all. */
  contentType?: string | null;
}

/** The exact bytes a delivery carries: objects are serialised, strings are UTF-8. */
export function bytesOf(body: unknown): Buffer {
  if (Buffer.isBuffer(body)) return body;
  return Buffer.from(typeof body === 'string' ? body : JSON.stringify(body), 'utf8');
}

export const sha256Hex = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** POST /webhooks/{key} with exactly these bytes (a Uint8Array body, so fetch adds no Content-Type). */
export async function deliver(baseUrl: string, body: unknown, options: DeliveryOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  const contentType = options.contentType === undefined ? 'application/json' : options.contentType;
  if (contentType !== null) headers['content-type'] = contentType;
  const response = await fetch(`${baseUrl}/webhooks/${options.key ?? WEBHOOK_KEY}`, {
    method: 'POST',
    headers,
    body: new Uint8Array(bytesOf(body)),
  });
  return read(response);
}

/** A request to the API, with the test bearer token unless another (or null for none) is given. */
export async function api(
  baseUrl: string,
  path: string,
  token: string | null = API_TOKEN,
  init: RequestInit = {},
): Promise<Answer> {
  const headers = new Headers(init.headers);
  if (token !== null) headers.set('authorization', `Bearer ${token}`);
  return read(await fetch(`${baseUrl}${path}`, { ...init, headers }));
}

/** A JSON body sent to the API of a running daemon with the test bearer token. */
export function sendJson(app: RunningDaemon, method: 'POST' | 'PATCH', path: string, body: unknown): Promise<Answer> {
  return api(app.url, path, API_TOKEN, {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** A problem+json answer of this status whose `field` (and detail) names the offending field. */
export function expectFieldProblem(answer: Answer, status: number, field: string): void {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(answer.json).toMatchObject({ status, field, detail: expect.stringContaining(field) });
}

/**
 * POST with a chunked body (no Content-Length), one chunk per write with a pause between them,
 * so the server reads the body as a stream. The answer may come before every chunk is written.
 */
export function postChunked(url: string, chunks: Buffer[], headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = request(url, { method: 'POST', headers, agent: false }, (res) => {
      answered = true;
      const parts: Buffer[] = [];
      res.on('data', (part: Buffer) => parts.push(part));
      res.on('end', () => {
        const responseHeaders = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (value !== undefined) responseHeaders.set(name, Array.isArray(value) ? value.join(', ') : value);
        }
        resolve(answer(res.statusCode ?? 0, responseHeaders, Buffer.concat(parts)));
      });
      res.on('error', reject);
    });
    // The server may close the connection once it has answered a body that is too large.
    req.on('error', (error) => {
      if (!answered) reject(error);
    });
    void (async () => {
      for (const chunk of chunks) {
        if (answered || req.destroyed) return;
        req.write(chunk);
        await new Promise((done) => setTimeout(done, 20));
      }
      if (!req.destroyed) req.end();
    })();
  });
}

/** The value of one sample of a Prometheus text exposition, 0 when absent. */
export function metricValue(exposition: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of exposition.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([label, value]) => present[label] === value)) return Number(match[3]);
  }
  return 0;
}

export async function scrape(baseUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const response = await fetch(`${baseUrl}/metrics`);
  return metricValue(await response.text(), name, labels);
}

import { randomBytes } from 'node:crypto';
import { ChildProcess, execFile, spawn } from 'node:child_process';
import { request } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../src/database/embedded-postgres.js';

/** The repository root (this file is test/support/daemon-process.ts). */
export const ROOT_DIR = fileURLToPath(new URL('../..', import.meta.url));

/** The built CLI entry point: `npm run build` (or `npm test`, which builds first) produces it. */
export const MAIN_JS = path.join(ROOT_DIR, 'dist', 'src', 'main.js');

/** Captured output kept per process: enough for a failure message, bounded under load. */
const MAX_OUTPUT_CHARS = 256 * 1024;

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SpawnDaemonOptions {
  /** Added to the minimal base environment (PATH, HOME); nothing else is inherited. */
  env?: Record<string, string>;
  /** Working directory of the daemon (DATA_DIR defaults to ./data in it). Default: the repository root. */
  cwd?: string;
  /** Arguments after main.js. Default: ['serve']. */
  args?: string[];
  /** Port to listen on, set as PORT unless env.PORT is given. Default: a free loopback port. */
  port?: number;
}

export interface StartDaemonOptions extends SpawnDaemonOptions {
  /** How long to wait for GET /health/ready to answer 200. Default 60 s. */
  readyTimeoutMs?: number;
}

export { freePort } from '../../src/database/embedded-postgres.js';

/**
 * The settings every built daemon under test shares, with `env` over them: a fresh token key, on
 * loopback, logging at TEST_LOG_LEVEL (default warn), no reconcile schedule and no sandbox. The
 * database, data directory, webhook keys and API tokens are each test's own.
 */
export function daemonEnv(env: Record<string, string>): Record<string, string> {
  return {
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    HOST: '127.0.0.1',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
    RECONCILE_CRON: 'off',
    SANDBOX: 'false',
    ...env,
  };
}

/** Only what a shell user would minimally have: tests must not depend on the runner's environment. */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ['PATH', 'HOME']) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/** Every daemon spawned and not yet exited, so a failing test cannot leave one running. */
const running = new Set<DaemonProcess>();

/** `node dist/src/main.js serve` as a child process, with its output captured. */
export class DaemonProcess {
  readonly url: string;
  private output = '';
  private errors = '';
  private exitStatus?: ExitStatus;
  private readonly exited: Promise<ExitStatus>;

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
    readonly env: Record<string, string>,
    readonly cwd: string,
  ) {
    this.url = `http://127.0.0.1:${port}`;
    const capture = (stream: string) => (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      this.output += stream === 'stderr' ? `[stderr] ${text}` : text;
      if (this.output.length > MAX_OUTPUT_CHARS) this.output = this.output.slice(-MAX_OUTPUT_CHARS);
      if (stream === 'stderr') {
        this.errors += text;
        if (this.errors.length > MAX_OUTPUT_CHARS) this.errors = this.errors.slice(-MAX_OUTPUT_CHARS);
      }
    };
    child.stdout!.on('data', capture('stdout'));
    child.stderr!.on('data', capture('stderr'));
    this.exited = new Promise((resolve) => {
      // 'exit', not 'close': a PostgreSQL left behind by a SIGKILLed daemon never holds our pipes
      // (embedded-postgres gives it pipes of its own), but 'exit' is the process itself either way.
      child.on('exit', (code, signal) => {
        this.exitStatus = { code, signal };
        running.delete(this);
        resolve(this.exitStatus);
      });
      child.on('error', (error) => {
        this.output += `[spawn error] ${error.message}\n`;
        this.exitStatus = { code: null, signal: null };
        running.delete(this);
        resolve(this.exitStatus);
      });
    });
    running.add(this);
  }

  /** Spawns the daemon; does not wait for it to be ready. */
  static async spawn(options: SpawnDaemonOptions = {}): Promise<DaemonProcess> {
    const port = options.port ?? (await freePort());
    const env = { ...baseEnv(), PORT: String(port), ...options.env };
    const cwd = options.cwd ?? ROOT_DIR;
    const child = spawn(process.execPath, [MAIN_JS, ...(options.args ?? ['serve'])], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new DaemonProcess(child, Number(env.PORT), env, cwd);
  }

  /** Spawns the daemon and waits until GET /health/ready answers 200. */
  static async start(options: StartDaemonOptions = {}): Promise<DaemonProcess> {
    for (let attempt = 1; ; attempt++) {
      const daemon = await DaemonProcess.spawn(options);
      try {
        await daemon.waitUntilReady(options.readyTimeoutMs ?? 60000);
        return daemon;
      } catch (error) {
        // A port found free can be taken by another process before the daemon binds it.
        const portChosenHere = options.port === undefined && options.env?.PORT === undefined;
        if (!portChosenHere || attempt >= 3 || !daemon.hasExited || !daemon.logs.includes('EADDRINUSE')) throw error;
      }
    }
  }

  /** Kills every daemon still running (for afterAll/afterEach) and waits for them to exit. */
  static async killAll(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await Promise.all(
      [...running].map(async (daemon) => {
        daemon.kill(signal);
        await daemon.waitForExit();
      }),
    );
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get hasExited(): boolean {
    return this.exitStatus !== undefined;
  }

  /** Everything the process wrote so far (the last 256 KiB), stderr lines marked. */
  get logs(): string {
    return this.output;
  }

  /** What the process wrote to stderr alone (the last 256 KiB). */
  get stderr(): string {
    return this.errors;
  }

  async waitUntilReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.exitStatus) {
        throw new Error(`daemon exited before it was ready (${describe(this.exitStatus)}):\n${this.output}`);
      }
      if ((await probe(`${this.url}/health/ready`)) === 200) return;
      await Promise.race([sleep(150), this.exited]);
    }
    this.kill('SIGKILL');
    await this.waitForExit(5000).catch(() => undefined);
    throw new Error(`daemon not ready within ${timeoutMs} ms:\n${this.output}`);
  }

  /** Sends a signal, if the process is still running. */
  kill(signal: NodeJS.Signals = 'SIGTERM'): void {
    if (!this.exitStatus) this.child.kill(signal);
  }

  /** Resolves with the exit code and signal; rejects (with the output) if it takes longer than timeoutMs. */
  async waitForExit(timeoutMs?: number): Promise<ExitStatus> {
    if (timeoutMs === undefined) return this.exited;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`daemon still running after ${timeoutMs} ms:\n${this.output}`)),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

function describe(status: ExitStatus): string {
  return status.signal ? `signal ${status.signal}` : `code ${status.code}`;
}

/** The status of a GET, or 0 when the connection fails. */
function probe(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request(url, { method: 'GET', agent: false, timeout: 5000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(0));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(0));
    req.end();
  });
}

/** Running processes whose command line contains `text` (from `ps -eo pid,args`), this process's `ps` excluded. */
/**
 * The processes whose command line mentions `text`. A PostgreSQL child shows its postmaster's command line for
 * the instant between its fork and its retitling, so a caller that counts servers counts `postmasters` of this.
 */
export function processesMentioning(text: string): Promise<Array<{ pid: number; ppid: number; args: string }>> {
  return new Promise((resolve, reject) => {
    execFile('ps', ['-eo', 'pid,ppid,args'], { env: baseEnv(), maxBuffer: 16 * 1024 * 1024 }, (error, stdout) => {
      if (error) return reject(error);
      resolve(
        stdout
          .split('\n')
          .slice(1)
          .map((line) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line))
          .filter((match): match is RegExpExecArray => match !== null && match[3].includes(text))
          .map((match) => ({ pid: Number(match[1]), ppid: Number(match[2]), args: match[3] })),
      );
    });
  });
}

/** Those of `processes` whose parent is not among them: the servers, not their children caught mid-fork. */
export function postmasters<T extends { pid: number; ppid: number }>(processes: T[]): T[] {
  return processes.filter((p) => !processes.some((q) => q.pid === p.ppid));
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** SIGTERM, then: exit code 0 within 10 s, and no PostgreSQL left running on the data directory. */
export async function expectCleanStop(daemon: DaemonProcess, dir: string): Promise<void> {
  daemon.kill('SIGTERM');
  const exit = await daemon.waitForExit(10_000);
  expect({ exit, logs: exit.code === 0 ? '' : daemon.logs }).toEqual({ exit: { code: 0, signal: null }, logs: '' });
  expect(await processesMentioning(dir)).toEqual([]);
}

/** Stops (by pid) any PostgreSQL our daemons left running on `dir`: SIGINT, then SIGKILL after 10 s. */
export async function stopLeftovers(dir: string): Promise<void> {
  const signal = async (name: NodeJS.Signals) => {
    for (const { pid } of await processesMentioning(dir)) {
      try {
        process.kill(pid, name);
      } catch {
        // already gone
      }
    }
  };
  await signal('SIGINT');
  const deadline = Date.now() + 10_000;
  while ((await processesMentioning(dir)).length > 0 && Date.now() < deadline) await sleep(100);
  await signal('SIGKILL');
}

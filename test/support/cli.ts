import { ChildProcess, spawn } from 'node:child_process';
import { MAIN_JS, ROOT_DIR } from './daemon-process.js';

/**
 * One-shot CLI commands (`node dist/src/main.js <command> …`, the built CLI) as child processes,
 * with their output captured and their start and exit times noted, so a test can run a command
 * beside the daemon, watch it, signal it, and line its lifetime up with other activity.
 */

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Date.now() when spawned and when it exited. */
  startedAt: number;
  endedAt: number;
}

/** Output kept per stream: enough for a failure message. */
const MAX_OUTPUT_CHARS = 512 * 1024;

/** Every command spawned and not yet exited, so a failing test cannot leave one running. */
const running = new Set<CliProcess>();

export class CliProcess {
  stdout = '';
  stderr = '';
  readonly startedAt = Date.now();
  endedAt?: number;
  readonly done: Promise<CliResult>;

  constructor(
    readonly child: ChildProcess,
    readonly args: string[],
  ) {
    child.stdout!.on('data', (chunk: Buffer) => {
      this.stdout = (this.stdout + chunk.toString('utf8')).slice(-MAX_OUTPUT_CHARS);
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString('utf8')).slice(-MAX_OUTPUT_CHARS);
    });
    running.add(this);
    this.done = new Promise((resolve) => {
      // 'close', not 'exit': the result must carry everything the command wrote.
      child.on('close', (code, signal) => {
        this.endedAt = Date.now();
        running.delete(this);
        resolve({
          code,
          signal,
          stdout: this.stdout,
          stderr: this.stderr,
          startedAt: this.startedAt,
          endedAt: this.endedAt,
        });
      });
      child.on('error', (error) => {
        this.stderr += `[spawn error] ${error.message}\n`;
        this.endedAt = Date.now();
        running.delete(this);
        resolve({
          code: null,
          signal: null,
          stdout: this.stdout,
          stderr: this.stderr,
          startedAt: this.startedAt,
          endedAt: this.endedAt,
        });
      });
    });
  }

  get running(): boolean {
    return this.endedAt === undefined;
  }

  kill(signal: NodeJS.Signals): void {
    if (this.running) this.child.kill(signal);
  }

  /** The result, or a rejection with the output so far after `timeoutMs`. */
  async wait(timeoutMs = 60000): Promise<CliResult> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `menu-sync ${this.args.join(' ')} still running after ${timeoutMs} ms:\n${this.stdout}\n${this.stderr}`,
            ),
          ),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([this.done, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILLs every command still running (for afterAll) and waits for them to exit. */
  static async killAll(): Promise<void> {
    await Promise.all(
      [...running].map(async (cli) => {
        cli.kill('SIGKILL');
        await cli.done;
      }),
    );
  }
}

/**
 * Starts `menu-sync <args>` with only PATH, HOME and `env` in its environment; does not wait.
 * `cwd` matters: the CLI reads a `.env` file there.
 */
export function spawnCli(args: string[], env: Record<string, string>, cwd = ROOT_DIR): CliProcess {
  const base: Record<string, string> = {};
  for (const name of ['PATH', 'HOME']) {
    const value = process.env[name];
    if (value !== undefined) base[name] = value;
  }
  const child = spawn(process.execPath, [MAIN_JS, ...args], {
    cwd,
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new CliProcess(child, args);
}

/** Runs `menu-sync <args>` to completion. */
export function runCli(
  args: string[],
  env: Record<string, string>,
  cwd = ROOT_DIR,
  timeoutMs = 60000,
): Promise<CliResult> {
  return spawnCli(args, env, cwd).wait(timeoutMs);
}

/** What a failed expectation should show about a command. */
export function describeRun(result: CliResult): string {
  return (
    `exit ${result.code}${result.signal ? ` (${result.signal})` : ''} after ${result.endedAt - result.startedAt} ms\n` +
    `--- stdout ---\n${result.stdout.slice(-8000)}\n--- stderr ---\n${result.stderr.slice(-8000)}`
  );
}

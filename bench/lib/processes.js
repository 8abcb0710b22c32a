// Child processes of the bench: started, awaited, and always stopped (SIGTERM, then SIGKILL).
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

const running = new Set();

/** Runs a command to completion; rejects on a non-zero exit or after timeoutMs (killing it). */
export function runToCompletion(command, args, { cwd, env, timeoutMs }) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      if (code === 0) resolve(output);
      else
        reject(new Error(`${command} ${args.join(' ')} failed (${signal ?? `exit ${code}`}):\n${output.slice(-4000)}`));
    });
  });
}

/** Starts a long-running service with stdout/stderr appended to logFile (or discarded). */
export function startService(command, args, { cwd, env, logFile }) {
  const fd = openSync(logFile ?? '/dev/null', 'w');
  // BENCH_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") reaches the services node runs, for profiling.
  const nodeArgs = command === 'node' ? (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean) : [];
  const child = spawn(command, [...nodeArgs, ...args], { cwd, env, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  running.add(child);
  child.exited = new Promise((resolve) =>
    child.on('exit', (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    }),
  );
  return child;
}

/** Polls GET url until it answers 200; fails if the process exits or timeoutMs passes. */
export async function waitReady(child, url, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let exited = null;
  child.exited.then((status) => (exited = status));
  while (Date.now() < deadline) {
    if (exited)
      throw new Error(`process ${child.pid} exited before it was ready (${exited.signal ?? `exit ${exited.code}`})`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await response.arrayBuffer();
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`${url} not ready after ${timeoutMs} ms`);
}

/** SIGTERM, then SIGKILL after graceMs. Resolves with how it ended. */
export async function stopService(child, graceMs = 12_000) {
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, signal: child.signalCode };
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  const status = await child.exited;
  clearTimeout(timer);
  return status;
}

/** Stops every child still running (used on errors and Ctrl-C). */
export async function stopAll() {
  await Promise.all([...running].map((child) => (child.exited ? stopService(child, 5000) : child.kill('SIGKILL'))));
}

/** A TCP port free on 127.0.0.1 right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Peak resident set (VmHWM) and current RSS of a live process, in MiB. */
export function memoryOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field) => Number(status.match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'))?.[1] ?? NaN);
    return { peakRssMiB: kb('VmHWM') / 1024, rssMiB: kb('VmRSS') / 1024 };
  } catch {
    return { peakRssMiB: NaN, rssMiB: NaN };
  }
}

// One `menu-sync` command (node dist/src/main.js …) run to its end and measured: wall seconds, its
// own CPU and peak RSS (from its rusage under GNU time when /usr/bin/time exists, else from
// /proc/<pid> every 100 ms), and the CPU of the bench database's PostgreSQL backends and of the
// server's background processes meanwhile (from /proc, every 100 ms).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { memoryOf } from './processes.js';

const TIME = '/usr/bin/time';
let ticksPerSecond = 100;
try {
  ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  // keep the usual 100
}

function ticksOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}

/** The bench database's backends and PostgreSQL's background processes, but not `client`'s own. */
async function postgresPids(client, database) {
  const { rows } = await client.query(
    `SELECT pid FROM pg_stat_activity
      WHERE (datname = $1 AND pid <> pg_backend_pid()) OR backend_type NOT IN ('client backend', 'autovacuum worker')`,
    [database],
  );
  return rows.map((row) => String(row.pid));
}

/**
 * Runs `node dist/src/main.js ...args` in `cwd` with `env`; `client` (connected to any database of
 * the server) finds the backends. A backend first seen during the run is counted from 0 ticks
 * (it was forked for the command); one that ends between two samples loses its last ≤ 100 ms.
 */
export async function runCommand({ cwd, env, args, client, database, timeoutMs = 6 * 3600_000 }) {
  const timed = existsSync(TIME);
  const dir = mkdtempSync(join(tmpdir(), 'menu-sync-bench-lifecycle-'));
  const out = join(dir, 'time');
  const node = ['node', 'dist/src/main.js', ...args];
  const before = new Map();
  for (const pid of await postgresPids(client, database)) before.set(pid, ticksOf(pid) ?? 0);
  const last = new Map();
  const started = performance.now();
  const child = timed
    ? spawn(TIME, ['-o', out, '-f', '%e %U %S %M %x', ...node], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(node[0], node.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk) => (output = (output + chunk).slice(-20_000)));
  child.stderr.on('data', (chunk) => (output = (output + chunk).slice(-20_000)));
  let polledTicks = 0;
  let polledPeak = 0;
  let sampling = false;
  const sample = async () => {
    if (sampling) return;
    sampling = true;
    try {
      if (!timed) {
        polledTicks = ticksOf(child.pid) ?? polledTicks;
        polledPeak = Math.max(polledPeak, memoryOf(child.pid).peakRssMiB || 0);
      }
      for (const pid of await postgresPids(client, database)) {
        const ticks = ticksOf(pid);
        if (ticks !== null) last.set(pid, ticks);
      }
    } catch {
      // a sample missed
    } finally {
      sampling = false;
    }
  };
  const poll = setInterval(sample, 100);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exit = await new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  clearTimeout(timer);
  clearInterval(poll);
  const seconds = (performance.now() - started) / 1000;
  await sample();
  let postgresTicks = 0;
  for (const [pid, ticks] of last) postgresTicks += ticks - (before.get(pid) ?? 0);
  let cpuSeconds = polledTicks / ticksPerSecond;
  let peakRssMiB = polledPeak;
  let code = exit.code;
  if (timed) {
    try {
      const [, user, system, maxRssKiB, status] = readFileSync(out, 'utf8').trim().split('\n').pop().split(' ');
      cpuSeconds = Number(user) + Number(system);
      peakRssMiB = Number(maxRssKiB) / 1024;
      code = Number(status);
    } catch {
      // killed before GNU time wrote: the exit status says so
    }
  }
  rmSync(dir, { recursive: true, force: true });
  const round1 = (value) => Math.round(value * 10) / 10;
  return {
    command: `menu-sync ${args.join(' ')}`,
    code,
    signal: exit.signal,
    seconds: round1(seconds),
    cpuSeconds: round1(cpuSeconds),
    postgresCpuSeconds: round1(postgresTicks / ticksPerSecond),
    peakRssMiB: round1(peakRssMiB),
    rusage: timed,
    output: output.slice(-3000),
  };
}

/** Whether this checkout's CLI has `command` (its name in `menu-sync --help`). */
export function hasCommand(cwd, env, command) {
  try {
    const help = execFileSync('node', ['dist/src/main.js', '--help'], { cwd, env, encoding: 'utf8' });
    return new RegExp(`^\\s+${command}\\b`, 'm').test(help);
  } catch (error) {
    return new RegExp(`^\\s+${command}\\b`, 'm').test(String(error.stdout ?? ''));
  }
}

// cli: how long the read-only CLI commands take, wall and CPU, beside `node -e 0` of the same run.
//
// Each command is run `--runs` times (default 11), round by round, under GNU time, which reads the child's own
// rusage (wait4): wall seconds, user + system CPU seconds, peak RSS. The medians are reported.
// The commands run beside a daemon serving a migrated database with `--sinks` sinks (default 100),
// both on the database (DATABASE_URL) and through the daemon's API (MENU_SYNC_URL).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createMigratedDatabase, databaseUrl } from './lib/database.js';
import { freePort, startService, stopService, waitReady } from './lib/processes.js';
import { postJson, sinkBenchEnv } from './lib/sink-changes.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const TIME = '/usr/bin/time';
const WEBHOOK_KEY = 'bench-webhook-key-0123456789abcdef';

export const description =
  'cli: status, sinks list and --help (on the database and through MENU_SYNC_URL) vs node -e 0';
export const defaults = { runs: 11, sinks: 100 };

/** One run of `args` under GNU time: its wall and CPU seconds and peak RSS, from the child's rusage. */
function timed(args, env) {
  const dir = mkdtempSync(join(tmpdir(), 'menu-sync-bench-cli-'));
  const out = join(dir, 'time');
  return new Promise((resolve, reject) => {
    const child = spawn(TIME, ['-o', out, '-f', '%e %U %S %M %x', ...args], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('exit', () => {
      try {
        const [wall, user, system, maxRssKiB, code] = readFileSync(out, 'utf8').trim().split('\n').pop().split(' ');
        if (!['0', '1'].includes(code)) throw new Error(`${args.join(' ')} exited ${code}:\n${stderr.slice(-2000)}`);
        resolve({ wall: Number(wall), cpu: Number(user) + Number(system), rssMiB: Number(maxRssKiB) / 1024 });
      } catch (error) {
        reject(error);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

export async function run({ runs = defaults.runs, sinks = defaults.sinks, logDir }) {
  mkdirSync(logDir, { recursive: true });
  const env = sinkBenchEnv({ WEBHOOK_KEYS: WEBHOOK_KEY });
  const database = await createMigratedDatabase({ cwd: ROOT, env, suffix: 'cli' });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const daemon = startService('node', ['dist/src/main.js', 'serve'], {
    cwd: ROOT,
    env: { ...env, DATABASE_URL: databaseUrl(database), PORT: String(port) },
    logFile: join(logDir, 'cli-daemon.log'),
  });
  try {
    await waitReady(daemon, `${base}/health/ready`, 180_000);
    for (let i = 0; i < sinks; i++)
      await postJson(`${base}/api/v1/sinks`, { kind: 'http', url: `http://127.0.0.1:9/sink-${i}`, from: 'now' });
    const onDatabase = { ...env, DATABASE_URL: databaseUrl(database) };
    const throughApi = { ...env, MENU_SYNC_URL: base };
    delete throughApi.TOKEN_ENCRYPTION_KEY;
    const main = ['node', 'dist/src/main.js'];
    const commands = [
      ['node -e 0 (baseline)', ['node', '-e', '0'], env],
      ['menu-sync --help', [...main, '--help'], env],
      ['menu-sync status (database)', [...main, 'status'], onDatabase],
      ['menu-sync sinks list (database)', [...main, 'sinks', 'list'], onDatabase],
      ['menu-sync status (MENU_SYNC_URL)', [...main, 'status'], throughApi],
      ['menu-sync sinks list (MENU_SYNC_URL)', [...main, 'sinks', 'list'], throughApi],
    ];
    const loadBefore = loadavg()[0];
    for (const [, args, commandEnv] of commands) await timed(args, commandEnv); // a first run warms the file cache
    // Round by round, every command once, so that a burst of other work falls on all of them alike.
    const samples = commands.map(() => []);
    for (let round = 0; round < runs; round++)
      for (const [index, [, args, commandEnv]] of commands.entries())
        samples[index].push(await timed(args, commandEnv));
    const measured = commands.map(([name], index) => ({
      name,
      wall: median(samples[index].map((sample) => sample.wall)),
      cpu: median(samples[index].map((sample) => sample.cpu)),
      rssMiB: median(samples[index].map((sample) => sample.rssMiB)),
      samples: samples[index],
    }));
    const baseline = measured[0];
    // Other work on the machine slows every command alike: the 1-minute load average says how much there was.
    const load = [loadBefore, loadavg()[0]].map((value) => value.toFixed(1)).join(' → ');
    return {
      settings: { runs, sinks },
      loadAverage: load,
      measured,
      tables: [
        {
          title: `CLI commands, median of ${runs} runs (wall and CPU seconds from the child's rusage), ${sinks} sinks; load average ${load}`,
          columns: ['command', 'wall s', 'CPU s', 'wall over node -e 0 s', 'peak RSS MiB'],
          rows: measured.map((row) => [
            row.name,
            row.wall.toFixed(2),
            row.cpu.toFixed(2),
            (row.wall - baseline.wall).toFixed(2),
            row.rssMiB.toFixed(0),
          ]),
        },
      ],
    };
  } finally {
    await stopService(daemon);
  }
}

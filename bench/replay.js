// bench/replay: `menu-sync replay` (rebuild both projections from the whole log into shadow
// schemas, then swap them in) over 1,000,000 logged events, with the replay process's peak RSS,
// next to the set-based SQL baseline of bench/projection measured in the same run on the same log.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createMigratedDatabase, databaseUrl, dropDatabase } from './lib/database.js';
import { waitForQuiet } from './lib/cpu.js';
import { memoryOf } from './lib/processes.js';
import { fill, runBaseline } from './projection.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const TARGET = { minRatio: 0.5, maxRssMiB: 300 };

export const description =
  'replay (rebuild from the log into shadow tables, then swap) of 1M events vs set-based SQL, with peak RSS';
export const defaults = { quietWait: 10 };

export async function run({ quietWait = defaults.quietWait }) {
  const events = Number(process.env.BENCH_REPLAY_EVENTS ?? 1_000_000);
  const env = {
    ...process.env,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: 'warn',
    SANDBOX: 'false',
  };
  const database = await createMigratedDatabase({ cwd: ROOT, env, suffix: 'replay' });
  const client = new pg.Client({ connectionString: databaseUrl(database), application_name: 'menu-sync-bench' });
  await client.connect();
  try {
    const filled = await fill(client, events);
    const baseline = await runBaseline(client, database, events, quietWait);
    if (quietWait > 0) await waitForQuiet({ maxWaitMs: quietWait * 1000, thresholdPct: 15 });
    const replay = await measureReplay({ ...env, DATABASE_URL: databaseUrl(database) }, events);
    const [{ products }] = (
      await client.query(`SELECT count(*)::int AS products FROM proj_menu.products WHERE NOT deleted`)
    ).rows;
    const [{ expected }] = (
      await client.query(`SELECT count(*)::int AS expected FROM bench_baseline.products WHERE NOT deleted`)
    ).rows;
    // Judged unrounded: 0.4988 shows as 0.5x but is not half.
    const exact = replay.eventsPerSec / baseline.eventsPerSec;
    const ratio = Math.round(exact * 1000) / 1000;
    const checks = {
      ratio: { value: ratio, met: exact >= TARGET.minRatio },
      rss: { value: replay.peakRssMiB, met: replay.peakRssMiB < TARGET.maxRssMiB },
      correctness: {
        value: `${products} live products (baseline ${expected})`,
        met: products === expected && replay.code === 0,
      },
    };
    console.log(
      `  replay: ${replay.seconds} s = ${replay.eventsPerSec} events/s (${ratio}x the baseline), peak RSS ${replay.peakRssMiB} MiB, ` +
        `exit ${replay.code}; live products ${products} (baseline ${expected})`,
    );
    return {
      settings: {
        events,
        replay: 'node dist/src/main.js replay (both projections, pages of 50,000)',
        baseline: 'as bench/projection',
      },
      filled,
      baseline,
      replay,
      checks,
      targetMet: Object.values(checks).every((check) => check.met),
      tables: [
        {
          title: `replay: rebuild of ${events} events vs set-based SQL (targets: >= ${TARGET.minRatio}x, RSS < ${TARGET.maxRssMiB} MB)`,
          columns: ['measure', 'seconds', 'events/s', 'ratio', 'peak RSS MiB', 'target'],
          rows: [
            ['baseline (set-based SQL, 8 tables)', baseline.seconds, baseline.eventsPerSec, '1x', '-', ''],
            [
              'menu-sync replay (both projections, swap)',
              replay.seconds,
              replay.eventsPerSec,
              `${ratio}x`,
              replay.peakRssMiB,
              checks.ratio.met && checks.rss.met ? 'met' : 'NOT met',
            ],
          ],
        },
      ],
    };
  } finally {
    await client.end().catch(() => undefined);
    await dropDatabase(database);
  }
}

/** Runs the command to completion, sampling its peak resident set while it lives. */
function measureReplay(env, events) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn('node', ['dist/src/main.js', 'replay'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    let peakRssMiB = 0;
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const sampler = setInterval(() => {
      const { peakRssMiB: peak } = memoryOf(child.pid);
      if (Number.isFinite(peak)) peakRssMiB = Math.max(peakRssMiB, peak);
    }, 200);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearInterval(sampler);
      const seconds = (performance.now() - started) / 1000;
      resolve({
        code,
        seconds: Math.round(seconds * 10) / 10,
        eventsPerSec: Math.round(events / seconds),
        peakRssMiB: Math.round(peakRssMiB * 10) / 10,
        output: output.slice(-2000),
      });
    });
  });
}

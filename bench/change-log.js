// Change-log benchmark: the projector's catch-up over the 1M-event log of the projection bench,
// writing the change log (CHANGES_TYPES default: the four menu types) against the same projector
// with the change log off (CHANGES_TYPES=none), on the same database in the same run.
//
//   fresh database migrated by `node dist/src/main.js migrate`
//   -> fill event_log with 1M events by SQL (bench/projection.js `fill`), VACUUM ANALYZE, CHECKPOINT
//   -> four catch-ups in ABBA order (off, on, on, off): each from an empty read model and change
//      log, pages of PAGE_ENTRIES (500,000) entries through ProjectionRepository.applyPage (dist/), as the
//      daemon's projector does, on one prepared connection
//   -> the ratio of the mean rates (on / off); the issue's target is >= 0.8
//   -> drop the database (also on error).
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createDataSource } from '../dist/src/database/data-source.factory.js';
import { PROJECTIONS } from '../dist/src/projection/projection-definitions.js';
import { PAGE_ENTRIES, ProjectionRepository } from '../dist/src/projection/projection.repository.js';
import { MENU_RESOURCE_TYPES } from '../dist/src/projection/published-changes.js';
import { admin, createMigratedDatabase, databaseUrl, dropDatabase } from './lib/database.js';
import { waitForQuiet } from './lib/cpu.js';
import { fill } from './projection.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const TARGET_RATIO = 0.8;

export const description = 'projector catch-up over 1M logged events with the change log on vs off (same run, ABBA)';
export const defaults = { quietWait: 10 };

export async function run({ quietWait = defaults.quietWait }) {
  const events = Number(process.env.BENCH_PROJECTION_EVENTS ?? 1_000_000);
  const env = { ...process.env, TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'), SANDBOX: 'false' };
  const database = await createMigratedDatabase({ cwd: ROOT, env, suffix: 'changes' });
  const client = new pg.Client({ connectionString: databaseUrl(database), application_name: 'menu-sync-bench' });
  await client.connect();
  const dataSource = createDataSource({ url: databaseUrl(database), poolSize: 2 });
  await dataSource.initialize();
  try {
    const filled = await fill(client, events);
    const runs = [];
    for (const changeLog of [false, true, true, false]) {
      await reset(client);
      if (quietWait > 0) await waitForQuiet({ maxWaitMs: quietWait * 1000, thresholdPct: 15 });
      runs.push({ changeLog, ...(await catchUp(dataSource, client, changeLog, events)) });
      const last = runs.at(-1);
      log(
        `  change log ${changeLog ? 'on ' : 'off'}: ${last.seconds} s = ${last.eventsPerSec} events/s, ${last.changes} changes written`,
      );
    }
    const mean = (on) => runs.filter((r) => r.changeLog === on).reduce((sum, r) => sum + r.eventsPerSec, 0) / 2;
    const ratio = Math.round((mean(true) / mean(false)) * 100) / 100;
    log(`  ratio on/off: ${ratio} (target >= ${TARGET_RATIO})`);
    return {
      settings: { events, pageSize: PAGE_ENTRIES, order: 'off, on, on, off', publishedTypes: MENU_RESOURCE_TYPES },
      filled,
      runs,
      ratio,
      targetMet: ratio >= TARGET_RATIO,
      tables: [
        {
          title: `Projector catch-up over ${events} events, change log on vs off (same database, same run)`,
          columns: ['run', 'change log', 'seconds', 'events/s', 'changes written'],
          rows: [
            ...runs.map((r, i) => [String(i + 1), r.changeLog ? 'on' : 'off', r.seconds, r.eventsPerSec, r.changes]),
            ['mean ratio on/off', '', '', ratio, `target >= ${TARGET_RATIO}`],
          ],
        },
      ],
    };
  } finally {
    await dataSource.destroy().catch(() => undefined);
    await client.end().catch(() => undefined);
    await dropDatabase(database);
  }
}

/** An empty read model and change log, checkpoints at the start. */
async function reset(client) {
  for (const projection of PROJECTIONS) {
    const tables = ['parked_events', ...projection.tables.map((t) => t.table)].map((t) => `${projection.schema}.${t}`);
    await client.query(`TRUNCATE ${tables.join(', ')}`);
    await client.query(`UPDATE ${projection.schema}.checkpoint SET transaction_id = '0', position = 0, applied = 0`);
  }
  await client.query('TRUNCATE change_log');
  await client.query('VACUUM ANALYZE');
  await admin('CHECKPOINT');
}

async function catchUp(dataSource, client, changeLog, events) {
  const projections = new ProjectionRepository(changeLog ? MENU_RESOURCE_TYPES : []);
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await projections.prepare(runner);
    const started = performance.now();
    for (const projection of PROJECTIONS) {
      while ((await projections.applyPage(runner, projection, PAGE_ENTRIES)).entries > 0);
    }
    const seconds = (performance.now() - started) / 1000;
    const [{ n }] = (await client.query('SELECT count(*)::int AS n FROM change_log')).rows;
    const applied = (
      await client.query(
        `SELECT min(applied)::int AS a FROM (SELECT applied FROM proj_menu.checkpoint UNION ALL SELECT applied FROM proj_orders.checkpoint) c`,
      )
    ).rows[0].a;
    if (applied !== events) throw new Error(`caught up ${applied} of ${events} events`);
    return { seconds: Math.round(seconds * 10) / 10, eventsPerSec: Math.round(events / seconds), changes: n };
  } finally {
    await runner.release();
  }
}

function log(line) {
  process.stderr.write(`${line}\n`);
}

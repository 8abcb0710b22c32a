// bench/lifecycle (issue 43): the event log's life on a partitioned log of --events events (10M),
// 80 % order events: the partitioning migration's lock on an unpartitioned log of that size
// (bench/partition-migration.js), then the oldest nine tenths archived (`menu-sync archive
// --before`), with the hot and archive bytes per event, the export rate, replay from the
// checkpoint and the hot tail against a full replay, reads above the horizon before and after,
// and every command's wall, CPU and peak RSS. Without the archive command in this checkout it
// says so and measures the rest (the tail replay then by `replay --from-checkpoint`).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statfsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { hasCommand, runCommand } from './lib/command-usage.js';
import { admin, createMigratedDatabase, databaseUrl, dropDatabase, keepDatabase } from './lib/database.js';
import { eventMix, fillEvents, hotSize, prepareLog } from './lib/lifecycle-log.js';
import { measureReads, readPlan } from './lib/lifecycle-reads.js';
import { freePort, memoryOf, startService, stopService, waitReady } from './lib/processes.js';
import { sinkBenchEnv } from './lib/sink-changes.js';
import { lifecycleTables } from './lib/lifecycle-tables.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const OWNER = '1001';
const ARCHIVED_SHARE = 0.9;
const ANSI_COLOUR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

export const description =
  'lifecycle: partitioning lock, archive of the oldest 9/10 of the log, bytes per event, replay from the checkpoint, reads above the horizon';
export const defaults = { events: '10m' };

const log = (line) => console.error(line);

/** "200k", "10m", "1500000" → a number of events. */
export function parseCount(text) {
  const match = /^(\d+(?:\.\d+)?)([km]?)$/i.exec(String(text).trim());
  if (!match) throw new Error(`--events=${text}: a count like 200k or 10m`);
  return Math.round(Number(match[1]) * { '': 1, k: 1e3, m: 1e6 }[match[2].toLowerCase()]);
}

function checkDisk(events) {
  const stats = statfsSync('/');
  const freeGiB = (stats.bavail * stats.bsize) / 2 ** 30;
  // ~3.1 KB hot per event of the 80 % order mix (a small run's full partitions), and WAL on top;
  // the migration's own log is dropped before this one is filled, and the archive is smaller.
  const needGiB = (events * 4000) / 2 ** 30 + 2;
  log(`  disk: ${freeGiB.toFixed(1)} GiB free on /, the run needs ~${needGiB.toFixed(1)} GiB at its peak`);
  if (freeGiB < needGiB)
    throw new Error(`${freeGiB.toFixed(1)} GiB free on /, the lifecycle bench needs ~${needGiB.toFixed(1)} GiB`);
}

/** bench/partition-migration.js on an unpartitioned log of `events` entries: its lock, as it prints it. */
function measureMigration(events) {
  log(`  partitioning migration on an unpartitioned log of ${events} entries (bench/partition-migration.js)`);
  const started = performance.now();
  const output = execFileSync('node', ['bench/partition-migration.js', `--entries=${events}`], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', NO_COLOR: '1' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 64 * 2 ** 20,
  }).replace(ANSI_COLOUR, ''); // Nest's logger colours its numbers (ESC[33m…) even into a pipe
  const lock = /lockHeldMs\W+(\d+)/.exec(output);
  const total = /migration: ([\d.]+) s in all/.exec(output);
  const writer = /writer beside it: (\d+) inserts, (\d+) failed, slowest (\d+) ms/.exec(output);
  return {
    entries: events,
    lockHeldMs: lock ? Number(lock[1]) : null,
    migrationSeconds: total ? Number(total[1]) : null,
    writer: writer ? { inserts: Number(writer[1]), failed: Number(writer[2]), slowestMs: Number(writer[3]) } : null,
    benchSeconds: Math.round((performance.now() - started) / 100) / 10,
    output: output.slice(-2000),
  };
}

/** Every file under `dir` with its size; manifest.json apart. */
function archiveFiles(dir) {
  const files = [];
  const walk = (at) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.push({ name: path.slice(dir.length + 1), bytes: statSync(path).size });
    }
  };
  walk(dir);
  const manifest = files.filter((f) => f.name.endsWith('manifest.json'));
  const data = files.filter((f) => !f.name.endsWith('manifest.json'));
  return {
    files: data.length,
    bytes: data.reduce((sum, f) => sum + f.bytes, 0),
    manifestBytes: manifest.reduce((sum, f) => sum + f.bytes, 0),
    list: files,
  };
}

/** Waits until both projections report lag 0. */
async function projected(base, timeoutMs = 3600_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const answer = await fetch(`${base}/api/v1/projections`);
    const { data } = await answer.json();
    if (data.every((projection) => projection.lag === 0)) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error('the daemon did not catch up');
}

export async function run({ events: eventsOption = defaults.events, keepDatabase: keep = false, logDir }) {
  const events = parseCount(eventsOption);
  mkdirSync(logDir, { recursive: true });
  const partitionSize = Number(process.env.EVENT_LOG_PARTITION_SIZE ?? 1_000_000);
  checkDisk(events);
  const archiveDir = mkdtempSync(join(tmpdir(), 'menu-sync-bench-archive-'));
  const env = sinkBenchEnv({ EVENT_LOG_PARTITION_SIZE: String(partitionSize), ARCHIVE_DIR: archiveDir });
  const archiveBuilt = hasCommand(ROOT, env, 'archive');
  if (!archiveBuilt)
    log('  archive: not built in this checkout (the archive, its bytes and the reads after it are not measured)');

  const migration = measureMigration(events);
  log(`  migration: lock held ${migration.lockHeldMs} ms, ${migration.migrationSeconds} s in all`);

  const database = await createMigratedDatabase({ cwd: ROOT, env, suffix: 'lifecycle' });
  const dbEnv = { ...env, DATABASE_URL: databaseUrl(database) };
  const client = new pg.Client({ connectionString: databaseUrl(database), application_name: 'menu-sync-bench' });
  await client.connect();
  const commands = {};
  const command = async (name, args) => {
    log(`  ${name}: menu-sync ${args.join(' ')}`);
    const result = await runCommand({ cwd: ROOT, env: dbEnv, args, client, database });
    commands[name] = result;
    log(
      `    ${result.seconds} s, CPU ${result.cpuSeconds} s, PostgreSQL ${result.postgresCpuSeconds} s, peak RSS ${result.peakRssMiB} MiB, exit ${result.code}`,
    );
    if (result.code !== 0)
      throw new Error(`menu-sync ${args.join(' ')} failed (exit ${result.code}):\n${result.output}`);
    return result;
  };
  let daemon;
  try {
    const { offset } = await prepareLog(client, partitionSize);
    const first = offset === 0 ? 0 : offset + 1;
    const cut = first + Math.round((ARCHIVED_SHARE * events) / partitionSize) * partitionSize;
    if (cut <= first || cut >= offset + events)
      throw new Error(
        `${events} events in partitions of ${partitionSize}: no partition to archive below 9/10 of the log`,
      );
    // The checkpoint is taken at the horizon: the log filled up to it, projected, checkpointed, then its tail.
    const headEvents = cut - offset;
    const fills = [
      await fillEvents(client, { from: 1, to: headEvents, events, partitionSize, label: 'fill up to the horizon' }),
    ];
    await command('replay to the horizon', ['replay']);
    await command('checkpoint', ['checkpoint']);
    fills.push(
      await fillEvents(client, { from: headEvents + 1, to: events, events, partitionSize, label: 'fill the tail' }),
    );
    await admin('CHECKPOINT');
    const mix = await eventMix(client);
    const hotBefore = await hotSize(client);
    log(`  hot: ${hotBefore.events} events, ${hotBefore.bytesPerEvent} B/event, ${mix.orderSharePct} % order events`);
    await command('full replay', ['replay']);

    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    daemon = startService('node', ['dist/src/main.js', 'serve'], {
      cwd: ROOT,
      env: { ...dbEnv, PORT: String(port) },
      logFile: join(logDir, 'lifecycle-daemon.log'),
    });
    await waitReady(daemon, `${base}/health/ready`, 300_000);
    await projected(base);
    const tail = offset + events - cut;
    const [{ as_of: asOf }] = (
      await client.query(`SELECT occurred_at AS as_of FROM event_log WHERE position = $1`, [cut + Math.floor(tail / 2)])
    ).rows;
    const [{ id: productId }] = (
      await client.query(`SELECT id FROM proj_menu.products WHERE owner_id = $1 AND NOT deleted ORDER BY id LIMIT 1`, [
        OWNER,
      ])
    ).rows;
    const plan = readPlan({ ownerId: OWNER, productId, asOf: asOf.toISOString() });
    log(`  reads before archiving (as_of ${asOf.toISOString()}, above the horizon at position ${cut})`);
    const readsBefore = await measureReads(base, plan);

    let archive = null;
    let readsAfter = null;
    let hotAfter = null;
    if (archiveBuilt) {
      await command('archive', ['archive', '--before', String(cut)]);
      await admin('CHECKPOINT');
      hotAfter = await hotSize(client);
      const files = archiveFiles(archiveDir);
      const rows = (
        await client.query(
          `SELECT partition_name, lower_bound::bigint, upper_bound::bigint, first_position::bigint, last_position::bigint,
                  events::bigint, bytes::bigint, state FROM event_log_archives ORDER BY upper_bound`,
        )
      ).rows;
      const archived = rows.filter((row) => row.state === 'archived');
      const archivedEvents = archived.reduce((sum, row) => sum + Number(row.events), 0);
      const archivedHotBytes = hotBefore.parts.filter((p) => p.upper <= cut).reduce((sum, p) => sum + p.bytes, 0);
      const seconds = commands.archive.seconds;
      archive = {
        cut,
        partitions: archived.length,
        events: archivedEvents,
        files,
        bytesPerEvent: archivedEvents > 0 ? Math.round(files.bytes / archivedEvents) : null,
        eventsPerSec: Math.round(archivedEvents / seconds),
        hotMiBPerSec: Math.round((archivedHotBytes / 2 ** 20 / seconds) * 10) / 10,
        rows,
      };
      log(`  archive: ${archivedEvents} events in ${files.files} files, ${archive.bytesPerEvent} B/event`);
      log('  reads after archiving');
      readsAfter = await measureReads(base, plan);
    }
    const daemonPeakRssMiB = Math.round(memoryOf(daemon.pid).peakRssMiB * 10) / 10;
    await stopService(daemon);
    daemon = undefined;

    if (archiveBuilt) {
      await command('replay (checkpoint + hot tail)', ['replay']);
      await command('archive verify', ['archive', 'verify']);
      await command('replay --from-archive', ['replay', '--from-archive']);
      const newest = archive.rows.filter((row) => row.state === 'archived').at(-1);
      if (newest)
        await command('archive restore (newest)', [
          'archive',
          'restore',
          `${newest.first_position}-${newest.last_position}`,
        ]);
    } else await command('replay (checkpoint + hot tail)', ['replay', '--from-checkpoint']);

    const result = {
      settings: { events, partitionSize, cut, offset, tail, archiveDir, archiveBuilt, owner: OWNER },
      migration,
      fills,
      mix,
      hotBefore: { ...hotBefore, parts: undefined },
      hotAfter: hotAfter && { ...hotAfter, parts: undefined },
      partitionsBefore: hotBefore.parts,
      archive,
      readsBefore,
      readsAfter,
      daemonPeakRssMiB,
      commands,
    };
    return { ...result, tables: lifecycleTables(result) };
  } finally {
    if (daemon) await stopService(daemon);
    await client.end().catch(() => undefined);
    if (keep) {
      keepDatabase(database);
      log(`  kept database ${database} and archive ${archiveDir}`);
    } else {
      await dropDatabase(database);
      rmSync(archiveDir, { recursive: true, force: true });
    }
  }
}

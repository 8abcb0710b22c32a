#!/usr/bin/env node
// Runs the benchmarks under bench/, prints their tables and writes JSON results to bench/results/.
//
//   npm run bench                                  # every benchmark (builds first)
//   node bench/run.js ingress                      # some of them (after `npm run build`)
//   node bench/run.js ingress --connections=50 --duration=5 --warmup=2 --quiet-wait=0
//
// A benchmark is a module bench/<name>.js exporting `description`, `defaults` and
// `async run(options)` returning `{ settings, tables: [{ title, columns, rows }], ... }`;
// add it to BENCHES below (projection, replay, ...).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, release } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { admin, dropAllDatabases, SERVER_URL } from './lib/database.js';
import { stopAll } from './lib/processes.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const RESULTS = join(HERE, 'results');

const BENCHES = {
  ingress: () => import('./ingress.js'),
  projection: () => import('./projection.js'),
  replay: () => import('./replay.js'),
  'change-log': () => import('./change-log.js'),
  sinks: () => import('./sinks.js'),
  'table-sinks': () => import('./table-sinks.js'),
  query: () => import('./query.js'),
  'scale-out': () => import('./scale-out.js'),
  fanout: () => import('./fanout.js'),
  'fanout-shares': () => import('./fanout-shares.js'),
  cli: () => import('./cli.js'),
  reconcile: () => import('./reconcile.js'),
  lifecycle: () => import('./lifecycle.js'),
};

function parseArgs(argv) {
  const names = [];
  const options = {};
  for (const arg of argv) {
    const option = /^--([\w-]+)(?:=(.*))?$/.exec(arg);
    if (!option) {
      names.push(arg);
      continue;
    }
    const [, name, value = 'true'] = option;
    if (name === 'help') options.help = true;
    else if (name === 'connections') options.connections = value.split(',').map(Number);
    else if (name === 'duration' || name === 'warmup') options[name] = Number(value);
    else if (name === 'quiet-wait') options.quietWait = Number(value);
    else if (name === 'events') options.events = value;
    else if (name === 'observe') options.observe = value;
    else if (name === 'database') options.database = value;
    else if (name === 'keep-database') options.keepDatabase = true;
    else if (name === 'only') options.only = value.split(',');
    else if (name === 'with-sinks') options.withSinks = true;
    else if (name === 'pooler') options.pooler = true;
    else if (name === 'freshness') options.freshness = true;
    else if (name === 'targets') options.targets = value.split(',');
    else if (name === 'sizes') options.sizes = value.split(',').map(Number);
    else if (name === 'idle' || name === 'rate') options[name] = Number(value);
    else if (name === 'runs' || name === 'sinks') options[name] = Number(value);
    else if (name === 'stores' || name === 'concurrency') options[name] = value.split(',').map(Number);
    else throw new Error(`unknown option --${name}`);
  }
  return { names, options };
}

function usage() {
  return `usage: node bench/run.js [${Object.keys(BENCHES).join('|')} ...] [--connections=10,50,200] [--duration=10] [--warmup=3] [--quiet-wait=10] [--events=1m|3m|1m,3m (query) | --events=10m (lifecycle)] [--observe=feed|poll (projection)] [--keep-database | --database=NAME (query: keep the filled database, or measure one kept before; lifecycle: keep its database and archive)] [--only=liveId,asOfPage,... (query: these measurements alone, no targets table)] [--with-sinks [--freshness] (ingress: an http and a postgres table sink attached)] [--pooler (ingress, projection: the daemon also with DATABASE_URL on PgBouncer, 127.0.0.1:6432)] [--targets=daemon,ingest-only,daemon+sinks,baseline (ingress)] [--only=http,sse,baseline --sizes=1,100 --idle=30 --rate=200 (fanout)] [--runs=11 --sinks=100 (cli)] [--stores=10000 --connections=10 --concurrency=1,8,32 (reconcile)]`;
}

function formatTable({ title, columns, rows }) {
  const cells = [columns, ...rows].map((row) => row.map((cell) => String(cell)));
  const widths = columns.map((_, i) => Math.max(...cells.map((row) => row[i].length)));
  const line = (row) =>
    `| ${row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join(' | ')} |`;
  const separator = `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [`${title}`, '', line(cells[0]), separator, ...cells.slice(1).map(line)].join('\n');
}

function git(args) {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

async function machine() {
  let postgres;
  try {
    postgres = (await admin('SHOW server_version')).rows[0].server_version;
  } catch (error) {
    throw new Error(`cannot reach PostgreSQL at ${SERVER_URL}: ${error.message}`, { cause: error });
  }
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    kernel: release(),
    node: process.version,
    postgres,
    commit: git(['rev-parse', '--short', 'HEAD']),
    dirty: (git(['status', '--porcelain', '--', 'src', 'migrations']) ?? '') !== '',
  };
}

async function main() {
  const { names, options } = parseArgs(process.argv.slice(2));
  if (options.help) {
    console.log(usage());
    return;
  }
  const selected = names.length > 0 ? names : Object.keys(BENCHES);
  const unknown = selected.filter((name) => !(name in BENCHES));
  if (unknown.length > 0) throw new Error(`unknown benchmark ${unknown.join(', ')}\n${usage()}`);
  if (!existsSync(join(ROOT, 'dist/src/main.js')))
    throw new Error('dist/src/main.js is missing: run `npm run build` first');
  mkdirSync(RESULTS, { recursive: true });
  const host = await machine();
  console.error(
    `machine: ${host.cpus} x ${host.cpuModel}, node ${host.node}, PostgreSQL ${host.postgres}, commit ${host.commit}${host.dirty ? ' (+ uncommitted changes)' : ''}`,
  );
  let failed = false;
  for (const name of selected) {
    const bench = await BENCHES[name]();
    const startedAt = new Date();
    console.error(`\n${name}: ${bench.description}`);
    let result;
    try {
      result = await bench.run({ ...bench.defaults, ...options, logDir: join(RESULTS, 'logs') });
    } catch (error) {
      failed = true;
      console.error(`${name} failed: ${error.stack ?? error}`);
      continue;
    }
    const seconds = Math.round((Date.now() - startedAt.getTime()) / 1000);
    console.log('');
    for (const table of result.tables) console.log(`${formatTable(table)}\n`);
    const { tables: _tables, ...data } = result;
    const file = join(RESULTS, `${name}-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(
      file,
      `${JSON.stringify({ bench: name, startedAt: startedAt.toISOString(), seconds, machine: host, ...data }, null, 2)}\n`,
    );
    console.log(`${name}: ${seconds} s; results in ${relative(process.cwd(), file)}`);
  }
  if (failed) process.exitCode = 1;
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    console.error(`\n${signal}: stopping the bench's processes and dropping its databases`);
    stopAll()
      .then(dropAllDatabases)
      .finally(() => process.exit(130));
  });
}

try {
  await main();
} catch (error) {
  console.error(error.message);
  process.exitCode = 1;
} finally {
  await stopAll();
  await dropAllDatabases();
}

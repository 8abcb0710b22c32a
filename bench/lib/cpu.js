// Where the CPU went during a measurement: the server under test, PostgreSQL (all its processes),
// the load generator (this process) and the whole machine, from /proc (Linux only).
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';

let ticksPerSecond = 100;
try {
  ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  // keep the usual 100
}

function processTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]); // utime + stime
  } catch {
    return null;
  }
}

/** CPU ticks of the given PostgreSQL processes, or of every process named postgres. */
function postgresTicks(pids) {
  const ticks = new Map();
  for (const entry of pids ?? readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    if (!pids) {
      try {
        if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
      } catch {
        continue;
      }
    }
    const value = processTicks(entry);
    if (value !== null) ticks.set(entry, value);
  }
  return ticks;
}

function machineTicks() {
  const [, ...values] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
  const numbers = values.map(Number);
  const idle = numbers[3] + (numbers[4] ?? 0);
  return { total: numbers.reduce((a, b) => a + b, 0), idle };
}

/**
 * Starts a sample; call the returned function at the end to get CPU percentages (100 = one core).
 * postgresPids: the PostgreSQL processes to count (the bench database's backends and the shared
 * background processes), so that other databases' work on a shared server counts as "other".
 */
export function sampleCpu(serverPid, postgresPids, postgresSubsetPids = []) {
  const pgPids = postgresPids?.map(String);
  const subset = postgresSubsetPids.map(String);
  const start = {
    at: process.hrtime.bigint(),
    server: processTicks(serverPid) ?? 0,
    postgres: postgresTicks(pgPids),
    self: process.cpuUsage(),
    machine: machineTicks(),
  };
  return function finish() {
    const seconds = Number(process.hrtime.bigint() - start.at) / 1e9;
    const server = ((processTicks(serverPid) ?? start.server) - start.server) / ticksPerSecond;
    let postgres = 0;
    let postgresSubset = 0;
    for (const [pid, ticks] of postgresTicks(pgPids)) {
      const used = (ticks - (start.postgres.get(pid) ?? 0)) / ticksPerSecond;
      postgres += used;
      if (subset.includes(pid)) postgresSubset += used;
    }
    const self = process.cpuUsage(start.self);
    const machine = machineTicks();
    const total = machine.total - start.machine.total;
    const pct = (value) => Math.round((value / seconds) * 1000) / 10;
    const machineBusyPct = total > 0 ? Math.round((1 - (machine.idle - start.machine.idle) / total) * 1000) / 10 : NaN;
    const serverPct = pct(server);
    const postgresPct = pct(postgres);
    const loadGeneratorPct = pct((self.user + self.system) / 1e6);
    return {
      seconds: Math.round(seconds * 10) / 10,
      cores: cpus().length,
      serverPct,
      postgresPct,
      /** The part of postgresPct spent by postgresSubsetPids (e.g. the projector's backend). */
      postgresSubsetPct: pct(postgresSubset),
      loadGeneratorPct,
      // Everything else, in % of one core: other processes on the machine (tests run by someone
      // else...), kernel work not charged to a process. High values mean a polluted measurement.
      otherPct: Math.max(0, Math.round(machineBusyPct * cpus().length - serverPct - postgresPct - loadGeneratorPct)),
      machineBusyPct,
    };
  };
}

/**
 * Waits (at most maxWaitMs) until the machine is quiet: busy below thresholdPct (of all cores)
 * over one second. Returns the last second's busy %.
 */
export async function waitForQuiet({ maxWaitMs, thresholdPct }) {
  const deadline = Date.now() + maxWaitMs;
  let busy;
  do {
    const before = machineTicks();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const after = machineTicks();
    const total = after.total - before.total;
    busy = total > 0 ? Math.round((1 - (after.idle - before.idle) / total) * 1000) / 10 : NaN;
    if (busy < thresholdPct) break;
  } while (Date.now() < deadline);
  return busy;
}

// bench/lifecycle's tables: the issue's figures against its goals, every command, the reads.
export const TARGET = {
  archiveShare: 0.25,
  replaySpeedup: 5,
  readGrowth: 1.1,
  ownersMs: 50,
  rssMiB: 300,
};

const mib = (bytes) => (bytes === null || bytes === undefined ? '-' : (bytes / 2 ** 20).toFixed(1));
const met = (ok) => (ok === null ? 'n/a' : ok ? 'met' : 'NOT met');
const NOT_BUILT = 'archive: not built in this checkout';

function readRatio(before, after) {
  if (!before || !after) return null;
  return Math.round((after.p50 / before.p50) * 100) / 100;
}

export function lifecycleTables({
  daemonPeakRssMiB,
  settings,
  migration,
  hotBefore,
  hotAfter,
  archive,
  readsBefore,
  readsAfter,
  commands,
  mix,
}) {
  const full = commands['full replay'];
  const tail = commands['replay (checkpoint + hot tail)'];
  const speedup = full && tail ? Math.round((full.seconds / tail.seconds) * 10) / 10 : null;
  const share =
    archive?.bytesPerEvent && hotBefore.bytesPerEvent ? archive.bytesPerEvent / hotBefore.bytesPerEvent : null;
  const readChecks = Object.keys(readsBefore)
    .filter((name) => name !== 'owners')
    .map((name) => readRatio(readsBefore[name], readsAfter?.[name]));
  const worstRead = readsAfter ? Math.max(...readChecks) : null;
  const owners = Math.max(readsBefore.owners.p99, readsAfter?.owners.p99 ?? 0);
  const peak = Math.max(...Object.values(commands).map((c) => c.peakRssMiB));
  const tailLabel = settings.archiveBuilt ? 'replay' : 'replay --from-checkpoint (no archive)';
  const summary = {
    title:
      `lifecycle: ${settings.events} events (${mix.orderSharePct} % order events), partitions of ${settings.partitionSize}, ` +
      `archive below position ${settings.cut}${settings.archiveBuilt ? '' : ` — ${NOT_BUILT}`}`,
    columns: ['figure', 'value', 'goal', ''],
    rows: [
      [
        `partitioning migration's lock, unpartitioned log of ${migration.entries} entries`,
        `${migration.lockHeldMs} ms (whole migration ${migration.migrationSeconds} s)`,
        '-',
        '',
      ],
      ['hot bytes per event before (partitions + indexes + TOAST, event_ids)', hotBefore.bytesPerEvent, '-', ''],
      [
        'archive bytes per event (files ÷ events archived)',
        archive
          ? `${archive.bytesPerEvent} (${share === null ? '-' : `${(share * 100).toFixed(1)} %`} of hot)`
          : NOT_BUILT,
        `<= ${TARGET.archiveShare * 100} % of hot`,
        met(share === null ? null : share <= TARGET.archiveShare),
      ],
      [
        'hot disk before → after, MiB (log partitions + event_ids + owners)',
        `${mib(hotBefore.bytes)} → ${hotAfter ? mib(hotAfter.bytes) : '-'}`,
        '-',
        '',
      ],
      [
        'database size before → after, MiB',
        `${mib(hotBefore.databaseBytes)} → ${hotAfter ? mib(hotAfter.databaseBytes) : '-'}`,
        '-',
        '',
      ],
      [
        'export rate (archive --before, whole command)',
        archive ? `${archive.eventsPerSec} events/s, ${archive.hotMiBPerSec} hot MiB/s` : NOT_BUILT,
        '-',
        '',
      ],
      [
        `${tailLabel} (checkpoint + ${settings.tail} tail) vs full replay of ${settings.events}`,
        speedup === null ? '-' : `${tail.seconds} s vs ${full.seconds} s: ${speedup}x`,
        `>= ${TARGET.replaySpeedup}x`,
        met(speedup === null ? null : speedup >= TARGET.replaySpeedup),
      ],
      [
        'reads above the horizon after / before archiving (worst p50 ratio)',
        worstRead === null ? NOT_BUILT : `${worstRead}x`,
        `<= ${TARGET.readGrowth}x`,
        met(worstRead === null ? null : worstRead <= TARGET.readGrowth),
      ],
      [
        `GET /api/v1/owners p99 at ${settings.events} events`,
        `${owners} ms`,
        `< ${TARGET.ownersMs} ms`,
        met(owners < TARGET.ownersMs),
      ],
      ['peak RSS of the commands (largest)', `${peak} MiB`, `< ${TARGET.rssMiB} MB`, met(peak < TARGET.rssMiB)],
    ],
  };
  const commandTable = {
    title: `lifecycle: the commands (wall, own CPU and peak RSS ${Object.values(commands)[0]?.rusage ? "from GNU time's rusage" : 'sampled from /proc'}; PostgreSQL: the database's backends and background processes, from /proc)`,
    columns: ['command', 'wall s', 'CPU s', 'PostgreSQL CPU s', 'peak RSS MiB', 'exit'],
    rows: Object.entries(commands).map(([name, c]) => [
      `${name}: ${c.command}`,
      c.seconds,
      c.cpuSeconds,
      c.postgresCpuSeconds,
      c.peakRssMiB,
      c.code,
    ]),
  };
  const readTable = {
    title: `lifecycle: reads on one daemon, sequential on one connection (ms p50 / p99), owner ${settings.owner}, as_of above the horizon; the daemon's peak RSS ${daemonPeakRssMiB} MiB`,
    columns: ['read', 'reads', 'bytes', 'before', 'after', 'after / before p50'],
    rows: Object.entries(readsBefore).map(([name, before]) => {
      const after = readsAfter?.[name];
      return [
        `${name} ${before.path.replace(/as_of=[^&]+/, 'as_of=…')}`,
        before.reads,
        before.bytes,
        `${before.p50} / ${before.p99}`,
        after ? `${after.p50} / ${after.p99}` : '-',
        after ? `${readRatio(before, after)}x` : '-',
      ];
    }),
  };
  return [summary, commandTable, readTable];
}

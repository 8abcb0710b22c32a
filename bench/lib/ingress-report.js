// The ingress bench's judgement and tables (bench/ingress.js): what makes a run suspect, daemon
// against baseline, and the tables of the report.
import { round } from './metrics-text.js';

/** The target: at these connections, the daemon's req/s at least minRatio × the baseline's (minRatioWithSinks with the sinks), p99 no worse. */
export const TARGET = { connections: [50, 200], minRatio: 1.5, minRatioWithSinks: 2 };

/** What makes a measurement suspect: not ~all 202, rows not matching, logged problems, noise. */
export function problems(run) {
  const out = [];
  const accepted = run.statusCodes['202'] ?? 0;
  if (accepted < 0.99 * run.requests)
    out.push(`only ${accepted} of ${run.requests} answers were 202: ${JSON.stringify(run.statusCodes)}`);
  if (run.errors + run.timeouts > 0) out.push(`${run.errors} connection errors, ${run.timeouts} timeouts`);
  if (!run.rowsMatch)
    out.push(`event_log holds ${run.rowsInLog} rows for ${run.accepted202IncludingWarmup} answers 202`);
  if (run.logErrors + run.logWarnings > 0)
    out.push(`${run.logErrors} errors, ${run.logWarnings} warnings logged (${run.logFile}): ${run.firstLogProblem}`);
  if (run.cpu.otherPct > 25)
    out.push(`other processes used ${run.cpu.otherPct} % of a core during the measurement: noisy`);
  if (run.sinks) {
    for (const [name, sink] of Object.entries(run.sinks.catchUp.sinks)) {
      if (sink.secondsToCaughtUp === null)
        out.push(`the ${name} sink did not catch up (${sink.state}: ${sink.lastError})`);
      else if (sink.state !== 'active') out.push(`the ${name} sink is ${sink.state}: ${sink.lastError}`);
    }
    if (!run.sinks.tableMatches)
      out.push(`the table sink's products (${run.sinks.targetRows}) differ from the daemon's (${run.sinks.products})`);
  }
  return out;
}

export function compare(connections, runs, target) {
  const daemon = runs.find((r) => r.target === target && r.connections === connections);
  const baseline = runs.find((r) => r.target === 'baseline' && r.connections === connections);
  // Judged unrounded: 1.496 shows as 1.5x but is not.
  const exact = daemon.reqPerSec / baseline.reqPerSec;
  const ratio = round(exact, 3);
  const targeted = TARGET.connections.includes(connections);
  const minRatio = target === 'daemon+sinks' ? TARGET.minRatioWithSinks : TARGET.minRatio;
  const p99NoWorse = daemon.p99Ms <= baseline.p99Ms;
  return {
    target,
    connections,
    ratio,
    daemonP99Ms: daemon.p99Ms,
    baselineP99Ms: baseline.p99Ms,
    p99NoWorse,
    targeted,
    minRatio,
    met: exact >= minRatio && p99NoWorse,
  };
}

export function tables(runs, comparisons) {
  const withSinks = runs.some((r) => r.sinks);
  return [
    {
      title: 'ingress: POST /webhooks/{key}',
      columns: [
        'target',
        'conns',
        'req/s',
        'p50 ms',
        'p99 ms',
        '202',
        'non-2xx',
        'errors',
        'peak RSS MiB',
        'CPU srv %',
        'CPU pg %',
        '(projector)',
        '(append)',
        'CPU gen %',
        'CPU other %',
        ...(withSinks ? ['CPU sink targets %'] : []),
        'srv µs/req',
        'pg µs/req',
        'batch mean',
      ],
      rows: runs.map((r) => [
        r.target,
        r.connections,
        Math.round(r.reqPerSec),
        r.p50Ms,
        r.p99Ms,
        r.statusCodes['202'] ?? 0,
        r.non2xx,
        r.errors + r.timeouts,
        r.peakRssMiB,
        r.cpu.serverPct,
        r.cpu.postgresPct,
        r.target !== 'baseline' ? r.cpu.postgresSubsetPct : '-',
        r.target !== 'baseline' ? r.cpu.appendPct : '-',
        r.cpu.loadGeneratorPct,
        r.cpu.otherPct,
        ...(withSinks ? [r.cpu.sinkTargetsPct ?? '-'] : []),
        r.cpuPerRequestUs.server,
        r.cpuPerRequestUs.postgres,
        r.appendBatchSize?.mean != null ? round(r.appendBatchSize.mean, 1) : '-',
      ]),
    },
    {
      title: `ingress: daemon / baseline (target at ${TARGET.connections.join(' and ')} connections: >= ${TARGET.minRatio}x req/s, ${TARGET.minRatioWithSinks}x with the sinks, p99 no worse)`,
      columns: ['daemon', 'conns', 'req/s ratio', 'p99 daemon ms', 'p99 baseline ms', 'target'],
      rows: comparisons.map((c) => [
        c.target,
        c.connections,
        `${c.ratio}x`,
        c.daemonP99Ms,
        c.baselineP99Ms,
        c.targeted ? (c.met ? 'met' : 'NOT met') : '(not targeted)',
      ]),
    },
    ...(withSinks ? [sinksTable(runs.filter((r) => r.sinks))] : []),
  ];
}

function sinksTable(runs) {
  const seconds = (value) => (value === null ? 'not caught up' : value);
  return {
    title:
      'ingress with sinks: behind when the load stopped (projector: events; sinks: changes) and seconds until caught up (every accepted delivery projected and delivered)',
    columns: [
      'conns',
      'projector lag',
      'projector s',
      'http lag',
      'http s',
      'postgres lag',
      'postgres s',
      'http changes received',
      'table rows = products',
    ],
    rows: runs.map(({ connections, sinks: { catchUp, received, products, targetRows, tableMatches } }) => [
      connections,
      catchUp.projector.lagAtStop,
      seconds(catchUp.projector.secondsToCaughtUp),
      catchUp.sinks.http.lagAtStop,
      seconds(catchUp.sinks.http.secondsToCaughtUp),
      catchUp.sinks.postgres.lagAtStop,
      seconds(catchUp.sinks.postgres.secondsToCaughtUp),
      received.changes,
      `${targetRows} ${tableMatches ? '=' : '≠'} ${products}`,
    ]),
  };
}

// Where the projector's time goes, sampled from outside: every ~100 ms, what the projector's
// PostgreSQL backend is doing (pg_stat_activity), classified by statement. `idle in transaction`
// is time spent in the daemon (Node) between two statements of a page; `idle` between pages.
import { setTimeout as sleep } from 'node:timers/promises';

/** A label for one pg_stat_activity sample of the projector's backend. */
export function classify({ state, query }) {
  if (state === null || state === undefined) return 'backend gone';
  if (state === 'idle') return 'idle (between pages)';
  if (state === 'idle in transaction') return `node, inside a page (after ${statement(query)})`;
  return statement(query);
}

function statement(query) {
  const text = (query ?? '').replace(/\s+/g, ' ').trim();
  const projection = /proj_orders|'order\.created'|SELECT resource ->> 'type'/.test(text)
    ? 'orders'
    : /proj_menu|'product\.created'|SELECT e\.subject_type, e\.subject_id/.test(text)
      ? 'menu'
      : '?';
  if (/^WITH changes \(/i.test(text)) return `page statement: extract + park + upserts (${projection})`;
  if (/^WITH page AS/i.test(text)) return 'page bounds';
  if (/^INSERT INTO page_changes/i.test(text)) return `extract changes (${projection})`;
  if (/parked_events/i.test(text)) return `parked check (${projection})`;
  const upsert = /^INSERT INTO (proj_\w+)\.(\w+) AS t/i.exec(text);
  if (upsert) return `upsert ${upsert[1].replace('proj_', '')}.${upsert[2]}`;
  if (/^UPDATE proj_\w+\.checkpoint/i.test(text)) return `move checkpoint (${projection})`;
  if (/^SELECT transaction_id::text AS transaction_id, position::text AS position FROM proj_/i.test(text))
    return `read checkpoint (${projection})`;
  if (/^SELECT e\.transaction_id::text/i.test(text)) return 'page keys';
  if (/^SELECT pg_advisory_xact_lock/i.test(text)) return 'page lock (pg_advisory_xact_lock)';
  if (/^(COMMIT|BEGIN|START TRANSACTION|SAVEPOINT|RELEASE|ROLLBACK)/i.test(text))
    return text.split(' ')[0].toUpperCase();
  if (/^TRUNCATE page_changes/i.test(text)) return 'truncate page_changes (one-by-one path)';
  return `other: ${text.slice(0, 60)}`;
}

/**
 * SQL giving, on a connection to the bench database, how long the oldest transaction holding an
 * xid in ANOTHER database of the server has been open (s), or null. xids are server-wide, so such
 * a transaction holds back pg_snapshot_xmin, below which the projector reads (docs/reference.md §3).
 */
export const FOREIGN_XACT_SQL = `(SELECT extract(epoch FROM now() - min(xact_start))::float8 FROM pg_stat_activity
  WHERE backend_xid IS NOT NULL AND datname IS DISTINCT FROM current_database())`;

/**
 * Samples the backend `pid` every intervalMs on `client` (which it then owns) until the returned
 * function is called; that function resolves with the summary.
 */
export function sampleActivity(client, pid, intervalMs) {
  const samples = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const { rows } = await client.query(
        `
        SELECT a.state, a.wait_event_type, a.wait_event, left(a.query, 600) AS query, ${FOREIGN_XACT_SQL} AS foreign_xact_s
          FROM (SELECT 1) AS one LEFT JOIN pg_stat_activity a ON a.pid = $1`,
        [pid],
      );
      samples.push(rows[0]);
      await sleep(intervalMs);
    }
  })();
  return async () => {
    stopped = true;
    await loop;
    return summarize(samples);
  };
}

/** Shares of the samples per label, largest first, and the wait events seen while active. */
export function summarize(samples) {
  const counts = new Map();
  const waits = new Map();
  for (const sample of samples) {
    const label = classify(sample);
    counts.set(label, (counts.get(label) ?? 0) + 1);
    if (sample.state === 'active' && sample.wait_event_type) {
      const wait = `${sample.wait_event_type}:${sample.wait_event}`;
      waits.set(wait, (waits.get(wait) ?? 0) + 1);
    }
  }
  const pct = (n) => Math.round((n / Math.max(1, samples.length)) * 1000) / 10;
  const foreign = samples.map((sample) => sample.foreign_xact_s ?? 0);
  return {
    samples: samples.length,
    /** The longest-open transaction of another database seen (s), and the share of samples with one open > 1 s. */
    foreignXactMaxSeconds: Math.round(Math.max(0, ...foreign) * 10) / 10,
    foreignXactOver1sPct: pct(foreign.filter((seconds) => seconds > 1).length),
    byStatement: [...counts].sort((a, b) => b[1] - a[1]).map(([label, n]) => ({ label, samples: n, pct: pct(n) })),
    waits: [...waits].sort((a, b) => b[1] - a[1]).map(([wait, n]) => ({ wait, samples: n, pct: pct(n) })),
  };
}

// What the appends wait on during a freshness run, sampled from outside: every `intervalMs`, the
// wait events of the bench database's backends running the append (INSERT INTO event_log), and of
// the server's checkpointer; plus the server-wide checkpoint and WAL counters over the run. A
// commit stuck behind a checkpoint's writes shows as WALSync/WALWrite on the append backends while
// the checkpointer is in DataFileSync/DataFileWrite (or between CheckpointWriteDelay naps).
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

const COUNTERS = `SELECT (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)::int AS checkpoints,
  (SELECT buffers_checkpoint FROM pg_stat_bgwriter)::bigint AS buffers_checkpoint,
  (SELECT buffers_backend FROM pg_stat_bgwriter)::bigint AS buffers_backend,
  (SELECT wal_bytes FROM pg_stat_wal)::bigint AS wal_bytes, (SELECT wal_sync FROM pg_stat_wal)::bigint AS wal_sync`;

/** Starts sampling on `client` (which it then owns); the returned function stops and summarizes. */
export function sampleAppendWaits(client, database, intervalMs = 50) {
  const appends = {};
  const checkpointer = {};
  const load = [];
  let samples = 0;
  let appendSamples = 0;
  let stopped = false;
  const count = (map, key) => (map[key] = (map[key] ?? 0) + 1);
  const loop = (async () => {
    const before = (await client.query(COUNTERS)).rows[0];
    while (!stopped) {
      const { rows } = await client.query(
        `SELECT backend_type, wait_event_type, wait_event FROM pg_stat_activity
        WHERE backend_type = 'checkpointer' OR (datname = $1 AND state = 'active' AND (query LIKE 'INSERT INTO event_log%' OR query LIKE 'WITH batch AS%'))`,
        [database],
      );
      samples++;
      for (const row of rows) {
        const wait = row.wait_event ? `${row.wait_event_type}:${row.wait_event}` : 'running (CPU)';
        if (row.backend_type === 'checkpointer') count(checkpointer, wait);
        else {
          appendSamples++;
          count(appends, wait);
        }
      }
      if (samples % 20 === 0) load.push(loadavg()[0]);
      await sleep(intervalMs);
    }
    const after = (await client.query(COUNTERS)).rows[0];
    return Object.fromEntries(Object.keys(after).map((key) => [key, Number(after[key]) - Number(before[key])]));
  })();
  return async () => {
    stopped = true;
    const counters = await loop;
    const pct = (map) =>
      Object.fromEntries(
        Object.entries(map)
          .sort((a, b) => b[1] - a[1])
          .map(([k, v]) => [k, Math.round((v / samples) * 1000) / 10]),
      );
    return {
      samples,
      intervalMs,
      // Share of the samples in which an append was in that state (an append in flight in x % of them, waiting on …).
      appendInFlightPct: Math.round((appendSamples / samples) * 1000) / 10,
      appendWaits: pct(appends),
      checkpointerWaits: pct(checkpointer),
      counters: { ...counters, walMiB: Math.round((counters.wal_bytes / 2 ** 20) * 10) / 10 },
      loadAverage1m: load.length
        ? Math.round((load.reduce((a, b) => a + b, 0) / load.length) * 100) / 100
        : loadavg()[0],
    };
  };
}

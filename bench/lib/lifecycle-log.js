// bench/lifecycle's event log: bench/projection's generator (bench/lib/projection-events.js) with
// 80 % order events after the creation phase, written by PostgreSQL into partitions of the
// bench's size, plus what the daemon's append writes beside each entry (event_ids,
// event_log_owners); and the log's sizes on disk.
import { performance } from 'node:perf_hooks';
import { fillSql, firstCreatedAt } from './projection-events.js';

const CHUNK = 100_000;
const ORDERS_PER_10K = 8000;
/** The partitions the partitioning migration makes on an empty log are of this size. */
const MIGRATION_PARTITION = 1_000_000;

/**
 * Where the log's positions start. With partitions of the migration's size, at 1; with another
 * size, at the migration's last bound, so that every filled position is in a partition of the
 * bench's size (the migration's two first partitions stay empty, as a fresh deployment's would
 * with that setting).
 */
export async function prepareLog(client, partitionSize) {
  const [{ last }] = (await client.query(`SELECT max(upper)::bigint AS last FROM event_log_partitions()`)).rows;
  const offset = partitionSize === MIGRATION_PARTITION ? 0 : Number(last) - 1;
  if (offset > 0) await client.query(`SELECT setval('event_log_position_seq', $1)`, [offset]);
  return { offset };
}

/**
 * Events from..to (1-based event numbers of a log of `events`) appended as the daemon would: the
 * entries, their ids in event_ids and their owners' counts in event_log_owners, a chunk per
 * transaction; partitions of `partitionSize` made ahead first.
 */
export async function fillEvents(client, { from, to, events, partitionSize, label }) {
  await client.query('SET jit = off');
  await client.query('SET synchronous_commit = off');
  await client.query('SELECT event_log_extend($1, $2)', [to - from + 1 + partitionSize, partitionSize]);
  const sql = fillSql({ ordersPer10k: ORDERS_PER_10K });
  const first = firstCreatedAt(events);
  const started = performance.now();
  for (let lo = from; lo <= to; lo += CHUNK) {
    const hi = Math.min(to, lo + CHUNK - 1);
    await client.query('BEGIN');
    const [{ head }] = (await client.query(`SELECT coalesce(max(position), 0)::bigint AS head FROM event_log`)).rows;
    await client.query(sql, [lo, hi, first]);
    await client.query(
      `WITH entries AS MATERIALIZED (SELECT event_id, position, owner_id, occurred_at FROM event_log WHERE position > $1),
            ids AS (INSERT INTO event_ids (event_id, position) SELECT event_id, position FROM entries)
       INSERT INTO event_log_owners (owner_id, events, first_at, last_at)
       SELECT owner_id, count(*), min(occurred_at), max(occurred_at) FROM entries WHERE owner_id IS NOT NULL GROUP BY owner_id`,
      [head],
    );
    await client.query('COMMIT');
    process.stderr.write(
      `\r  ${label}: ${hi} / ${events} events, ${Math.round((performance.now() - started) / 1000)} s`,
    );
  }
  process.stderr.write('\n');
  const seconds = (performance.now() - started) / 1000;
  await client.query('VACUUM (ANALYZE) event_log, event_ids, event_log_owners');
  await client.query('RESET jit');
  await client.query('RESET synchronous_commit');
  return { events: to - from + 1, seconds: Math.round(seconds * 10) / 10 };
}

/** Each partition's bounds, rows and bytes (table, indexes and TOAST), in order. */
export async function partitions(client) {
  const { rows } = await client.query(
    `SELECT p.partition::text AS name, p.lower::bigint, p.upper::bigint, pg_total_relation_size(p.partition)::bigint AS bytes,
            (SELECT count(*) FROM event_log e WHERE e.tableoid = p.partition)::bigint AS events
       FROM event_log_partitions() p ORDER BY p.upper`,
  );
  return rows.map((row) => ({
    name: row.name,
    lower: row.lower === null ? null : Number(row.lower),
    upper: Number(row.upper),
    bytes: Number(row.bytes),
    events: Number(row.events),
  }));
}

/** The hot log: the partitions' bytes and events, event_ids and event_log_owners (which no archive touches). */
export async function hotSize(client) {
  const parts = await partitions(client);
  const [row] = (
    await client.query(
      `SELECT pg_total_relation_size('event_ids')::bigint AS ids, pg_total_relation_size('event_log_owners')::bigint AS owners,
              (SELECT count(*) FROM event_ids)::bigint AS id_rows, pg_database_size(current_database())::bigint AS database`,
    )
  ).rows;
  const logBytes = parts.reduce((sum, p) => sum + p.bytes, 0);
  const events = parts.reduce((sum, p) => sum + p.events, 0);
  const bytes = logBytes + Number(row.ids) + Number(row.owners);
  return {
    events,
    partitions: parts.filter((p) => p.events > 0).length,
    logBytes,
    eventIdsBytes: Number(row.ids),
    eventIds: Number(row.id_rows),
    ownersBytes: Number(row.owners),
    bytes,
    bytesPerEvent: events > 0 ? Math.round(bytes / events) : null,
    databaseBytes: Number(row.database),
    parts,
  };
}

/** The event mix as filled: events per type and the share of order events. */
export async function eventMix(client) {
  const { rows } = await client.query(
    `SELECT event_type, count(*)::bigint AS n FROM event_log GROUP BY 1 ORDER BY 2 DESC`,
  );
  const byType = Object.fromEntries(rows.map((row) => [row.event_type, Number(row.n)]));
  const total = Object.values(byType).reduce((a, b) => a + b, 0);
  const orders = Object.entries(byType)
    .filter(([type]) => type.startsWith('order.'))
    .reduce((sum, [, n]) => sum + n, 0);
  const [{ payload }] = (
    await client.query(`SELECT avg(octet_length(payload::text))::int AS payload FROM event_log TABLESAMPLE SYSTEM (1)`)
  ).rows;
  return { byType, orderSharePct: Math.round((orders / total) * 1000) / 10, meanPayloadBytes: payload };
}

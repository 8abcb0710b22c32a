import type pg from 'pg';

// The statements of the append (EventLogRepository.append), for the partitioned log and for the
// log of before migration 1766800000000.

export const COLUMNS = [
  'event_id',
  'event_type',
  'subject_type',
  'subject_id',
  'owner_id',
  'occurred_at',
  'event_seq',
  'source',
  'handled',
  'received_at',
  'key_id',
  'content_type',
  'payload',
  'raw_body',
  'raw_sealed',
  'raw_key',
  'raw_key_at',
  'sha256',
] as const;
const ARRAY_TYPES = [
  'text',
  'text',
  'text',
  'text',
  'text',
  'timestamptz',
  'numeric',
  'text',
  'boolean',
  'timestamptz',
  'text',
  'text',
  'json',
  'bytea',
  'boolean',
  'bytea',
  'text',
  'bytea',
];
/** An array column cannot travel as an element of an array parameter: its literal does, cast back here. */
const SELECTED = COLUMNS.map((column) => (column === 'raw_key_at' ? 'raw_key_at::integer[]' : column));

/**
 * One statement whose text never changes (a named prepared statement: parsed and planned once per
 * connection), taking the batch as one array per column, zipped by ROWS FROM. The payloads travel
 * as one JSON array joined from their bytes (see jsonArray): node-pg would otherwise escape every
 * character of every payload into an array literal. json_array_elements gives each element's text
 * verbatim (without surrounding whitespace, which the parser keeps in raw_body when a body has any).
 * An event id is claimed in `event_ids` (the log's partitions cannot hold a unique key on it) with
 * its position, in input order; only the entries it claimed are logged, and their owners counted
 * (one row per owner per append, so concurrent appends never wait on each other's rows).
 */
export const APPEND: Omit<pg.QueryConfig, 'values'> = {
  name: 'menu_sync_append',
  text: `WITH batch AS (
           SELECT ${SELECTED.join(', ')}, ord
             FROM ROWS FROM (${COLUMNS.map((column, i) =>
               column === 'payload' ? `json_array_elements($${i + 1}::json)` : `unnest($${i + 1}::${ARRAY_TYPES[i]}[])`,
             ).join(', ')})
                  WITH ORDINALITY AS input (${COLUMNS.join(', ')}, ord)),
         claimed AS (
           INSERT INTO event_ids (event_id, position)
           SELECT event_id, nextval('event_log_position_seq') FROM (SELECT event_id FROM batch ORDER BY ord) AS ordered
           ON CONFLICT (event_id) DO NOTHING
           RETURNING event_id, position),
         logged AS (
           INSERT INTO event_log (position, ${COLUMNS.join(', ')})
           SELECT claimed.position, ${COLUMNS.map((column) => `batch.${column}`).join(', ')}
             FROM batch JOIN claimed USING (event_id)
           RETURNING owner_id, occurred_at),
         owners AS (
           INSERT INTO event_log_owners (owner_id, events, first_at, last_at)
           SELECT owner_id, count(*), min(occurred_at), max(occurred_at) FROM logged
            WHERE owner_id IS NOT NULL GROUP BY owner_id)
         SELECT event_id, position FROM claimed`,
};
export const POSITIONS: Omit<pg.QueryConfig, 'values'> = {
  name: 'menu_sync_positions',
  text: `SELECT event_id, position FROM event_ids WHERE event_id = ANY($1::text[])`,
};

/**
 * The append and the duplicates' lookup on the log of before migration 1766800000000 (one table,
 * a unique key on `event_id`): what a process of this version runs until that migration has run,
 * so it can be started before `menu-sync migrate` and go on through it (an upgrade in place, new
 * processes first). EventLogRepository finds which one the database takes, and looks again when
 * its statement is refused for the other's layout.
 */
export const UNPARTITIONED_APPEND: Omit<pg.QueryConfig, 'values'> = {
  name: 'menu_sync_append_unpartitioned',
  text: `INSERT INTO event_log (${COLUMNS.join(', ')})
         SELECT ${SELECTED.join(', ')}
           FROM ROWS FROM (${COLUMNS.map((column, i) =>
             column === 'payload' ? `json_array_elements($${i + 1}::json)` : `unnest($${i + 1}::${ARRAY_TYPES[i]}[])`,
           ).join(', ')})
                WITH ORDINALITY AS input (${COLUMNS.join(', ')}, ord)
          ORDER BY ord
         ON CONFLICT (event_id) DO NOTHING
         RETURNING event_id, position`,
};
export const UNPARTITIONED_POSITIONS: Omit<pg.QueryConfig, 'values'> = {
  name: 'menu_sync_positions_unpartitioned',
  text: `SELECT event_id, position FROM event_log WHERE event_id = ANY($1::text[])`,
};

/** Which layout of the log the database has. */
export type LogLayout = 'partitioned' | 'unpartitioned';

/** SQLSTATEs of an append sent for the other layout: `event_ids` missing (42P01), no unique key on `event_id` (42P10). */
export function isOtherLayout(error: unknown): boolean {
  const { code } = error as { code?: string };
  return code === '42P01' || code === '42P10';
}

export const LAYOUT_SQL = `SELECT to_regclass('event_ids') IS NOT NULL AS partitioned`;

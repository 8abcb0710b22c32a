/** NOTIFYed (on commit) by every transaction that wrote changes: feeds waiting for changes wake on it. */
export const CHANGES_CHANNEL = 'menu_sync_changes';

/**
 * A CTE of the page statement that notifies CHANGES_CHANNEL when any of the `_published` CTEs of
 * `tables` wrote a row; the statement must reference it (`SELECT count(*) FROM notified`) for it to run.
 */
export function notifiedSql(tables: string[]): string {
  if (tables.length === 0) return `notified AS (SELECT 1 WHERE false)`;
  return `notified AS (SELECT pg_notify('${CHANGES_CHANNEL}', '')
                         WHERE EXISTS (${tables.map((table) => `SELECT 1 FROM ${table}_published`).join(' UNION ALL ')}))`;
}

/** The four menu types: what CHANGES_TYPES publishes by default. */
export const MENU_RESOURCE_TYPES: readonly string[] = ['collection', 'product', 'trait', 'trait_option'];

/** What a resource shows through the API (GET /api/v1/{type}/{id}): a change is published when any of it changes. */
export const VISIBLE_COLUMNS = [
  'owner_id',
  'attributes',
  'relationships',
  'event_id',
  'occurred_at',
  'position',
  'deleted',
] as const;

/** The change-log row of a resource row aliased `n` (columns as in the resource tables, plus data_event_id). */
export function changeRowSql(type: string, n = 'n'): string {
  return `'${type}:' || ${n}.id || ':' || ${n}.position || ':'
           || substr(md5(coalesce(${n}.data_event_id, '') || '/' || pg_current_xact_id()::text), 1, 12),
         '${type}', ${n}.id, ${n}.owner_id, CASE WHEN ${n}.deleted THEN 'delete' ELSE 'upsert' END,
         menu_sync_resource('${type}', ${n}.id, ${n}.owner_id, ${n}.attributes, ${n}.relationships, ${n}.event_id,
                            ${n}.occurred_at, ${n}.position, ${n}.deleted)`;
}

const visible = (alias: string) => `(${VISIBLE_COLUMNS.map((column) => `${alias}.${column}`).join(', ')})`;

/**
 * CTEs of a page statement that upsert one resource table and publish a change for every row whose
 * visible state the upsert changed: `<table>_before` reads the rows the upsert may touch (all parts
 * of one statement see the snapshot from before it; `= ANY(ARRAY(…))` keeps that an index lookup,
 * with nested loops off), `<table>` is the upsert returning the rows it wrote, and
 * `<table>_published` inserts the change rows, in log order. An upsert that leaves what the API
 * shows as it was (none does today: it writes only newer versions) publishes nothing.
 */
export function publishedChangesSql(
  schema: string,
  table: string,
  type: string,
  candidateIds: string,
  upsert: string,
): string {
  return `${table}_before AS MATERIALIZED (
         SELECT id, ${VISIBLE_COLUMNS.join(', ')} FROM ${schema}.${table} WHERE id = ANY (ARRAY(${candidateIds}))),
       ${table} AS (${upsert}
         RETURNING t.id, ${VISIBLE_COLUMNS.map((column) => `t.${column}`).join(', ')}, t.data_event_id),
       ${table}_published AS (
         INSERT INTO change_log (change_id, type, id, owner_id, op, resource)
         SELECT ${changeRowSql(type)}
           FROM ${table} n LEFT JOIN ${table}_before o USING (id)
          WHERE o.id IS NULL OR ${visible('o')} IS DISTINCT FROM ${visible('n')}
          ORDER BY n.position, n.id
         RETURNING 1)`;
}

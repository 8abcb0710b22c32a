// The projection bench's baseline: the read model rebuilt from the whole log by set-based SQL, one
// `INSERT … SELECT DISTINCT ON (id) … ORDER BY id, version DESC` per table, into copies of the
// daemon's tables (same columns, generated columns and indexes) in a scratch schema.
export const BASELINE_SCHEMA = 'bench_baseline';

export const MENU_TABLES = [
  { type: 'collection', table: 'collections' },
  { type: 'product', table: 'products' },
  { type: 'trait', table: 'traits' },
  { type: 'trait_option', table: 'trait_options' },
];
export const ORDER_TABLES = [
  { type: 'order', table: 'orders' },
  { type: 'order_product', table: 'order_products' },
  { type: 'order_product_trait_option', table: 'order_product_trait_options' },
  { type: 'store', table: 'stores' },
];
export const TABLES = [
  ...MENU_TABLES.map((t) => ({ ...t, schema: 'proj_menu' })),
  ...ORDER_TABLES.map((t) => ({ ...t, schema: 'proj_orders' })),
];

const COLUMNS = `id, owner_id, attributes, relationships, deleted, occurred_at, event_seq, event_id, position,
                 data_occurred_at, data_event_seq, data_event_id`;

/** The scratch schema: empty copies of the eight read-model tables. Not timed. */
export function baselineSetupSql() {
  return [
    `DROP SCHEMA IF EXISTS ${BASELINE_SCHEMA} CASCADE`,
    `CREATE SCHEMA ${BASELINE_SCHEMA}`,
    ...TABLES.map(
      ({ schema, table }) => `CREATE TABLE ${BASELINE_SCHEMA}.${table} (LIKE ${schema}.${table} INCLUDING ALL)`,
    ),
  ];
}

/**
 * One statement per menu table: per id, the newest event (docs/reference.md §4 version order) among the
 * type's created/updated/destroyed events; its subject taken from `included` of the parsed payload.
 * Every payload of the type is parsed (the lateral sits below the sort), as a naive rebuild does.
 */
export function menuBaselineSql({ type, table }) {
  const destroyed = `e.event_type = '${type}.destroyed'`;
  return `
    INSERT INTO ${BASELINE_SCHEMA}.${table} (${COLUMNS})
    SELECT DISTINCT ON (e.subject_id)
           e.subject_id, e.owner_id, coalesce(s.resource -> 'attributes', '{}'), coalesce(s.resource -> 'relationships', '{}'),
           ${destroyed}, e.occurred_at, coalesce(e.event_seq, '-Infinity'), e.event_id, e.position,
           CASE WHEN NOT ${destroyed} THEN e.occurred_at END, CASE WHEN NOT ${destroyed} THEN coalesce(e.event_seq, '-Infinity') END,
           CASE WHEN NOT ${destroyed} THEN e.event_id END
      FROM event_log e
      LEFT JOIN LATERAL (SELECT resource FROM jsonb_array_elements(e.payload::jsonb -> 'included') AS resource
                          WHERE NOT ${destroyed} AND resource ->> 'type' = e.subject_type AND resource ->> 'id' = e.subject_id
                          LIMIT 1) AS s ON true
     WHERE e.subject_type = '${type}' AND e.event_type IN ('${type}.created', '${type}.updated', '${type}.destroyed')
     ORDER BY e.subject_id, e.occurred_at DESC, coalesce(e.event_seq, '-Infinity') DESC, e.event_id COLLATE "C" DESC`;
}

/** One statement for the four order tables: order events' `included` exploded once, then one DISTINCT ON per table. */
export function ordersBaselineSql() {
  const inserts = ORDER_TABLES.map(
    ({ type, table }, i) => `
      t${i} AS (INSERT INTO ${BASELINE_SCHEMA}.${table} (${COLUMNS})
                SELECT DISTINCT ON (id) id, owner_id, attributes, relationships, false, occurred_at, event_seq, event_id, position,
                       occurred_at, event_seq, event_id
                  FROM changes WHERE type = '${type}'
                 ORDER BY id, occurred_at DESC, event_seq DESC, event_id COLLATE "C" DESC
                RETURNING 1)`,
  );
  return `
    WITH changes AS MATERIALIZED (
      SELECT resource ->> 'type' AS type, resource ->> 'id' AS id, e.owner_id, e.occurred_at, coalesce(e.event_seq, '-Infinity') AS event_seq,
             e.event_id, e.position, coalesce(resource -> 'attributes', '{}') AS attributes,
             coalesce(resource -> 'relationships', '{}') AS relationships
        FROM event_log e
       CROSS JOIN LATERAL jsonb_array_elements(e.payload::jsonb -> 'included') AS resource
       WHERE e.subject_type = 'order' AND e.event_type IN ('order.created', 'order.updated')
         AND resource ->> 'type' IN (${ORDER_TABLES.map(({ type }) => `'${type}'`).join(', ')}) AND resource ->> 'id' IS NOT NULL),
    ${inserts.join(',')}
    SELECT ${ORDER_TABLES.map((_, i) => `(SELECT count(*) FROM t${i})`).join(' + ')} AS rows`;
}

/**
 * The daemon's tables against the baseline's, per table: rows on one side only, rows whose
 * `deleted`, version or (live rows) attributes/relationships differ, and live counts.
 */
export function compareSql({ schema, table }) {
  return `
    SELECT count(*) FILTER (WHERE d.id IS NULL)::int AS missing,
           count(*) FILTER (WHERE b.id IS NULL)::int AS extra,
           count(*) FILTER (WHERE d.id IS NOT NULL AND b.id IS NOT NULL AND (d.deleted <> b.deleted OR d.event_id <> b.event_id
             OR (NOT b.deleted AND (d.attributes <> b.attributes OR d.relationships <> b.relationships))))::int AS differ,
           count(*) FILTER (WHERE d.id IS NOT NULL AND NOT d.deleted)::int AS daemon_live,
           count(*) FILTER (WHERE b.id IS NOT NULL AND NOT b.deleted)::int AS baseline_live,
           count(*) FILTER (WHERE b.id IS NOT NULL AND b.deleted)::int AS baseline_deleted
      FROM ${schema}.${table} d FULL JOIN ${BASELINE_SCHEMA}.${table} b USING (id)`;
}

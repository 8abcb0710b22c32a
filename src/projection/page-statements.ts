import pg from 'pg';
import type { LogCheckpoint } from '../event-log/log-entry.js';
import { ownerVersionsCte } from './owner-versions.js';
import { CHANGE_COLUMNS, NEWEST_FIRST, versionRow } from './projection-definitions.js';
import type { ProjectionDefinition } from './projection-definitions.js';
import { notifiedSql, publishedChangesSql } from './published-changes.js';

// The SQL of a projector page (docs/reference.md §4), built here and sent by ProjectionRepository: where a
// page starts and ends, the one statement that applies a range of the log to a projection's tables
// (and, for the published types, writes their changes), and the checkpoint's compare-and-set.

/** The entries of a page: after ($1, $2) up to ($3, $4) in (transaction id, position) order. */
export const RANGE = `e.transaction_id BETWEEN $1::xid8 AND $3::xid8
      AND (e.transaction_id, e.position) > ($1::xid8, $2::bigint) AND (e.transaction_id, e.position) <= ($3::xid8, $4::bigint)`;
/** What pageBoundsSql answers: where the page starts (the checkpoint) and ends, its entries, and how many the projection reads. */
export interface PageBounds {
  from_transaction_id: string;
  from_position: string;
  transaction_id: string | null;
  position: string | null;
  entries: number;
  relevant: number;
}

/**
 * The next page of `schema`'s projection: its checkpoint and the last of up to `limit` entries after
 * it (not beyond `until`), below the log's horizon. Literal SQL (what it inlines is checked) so that
 * it can travel in a batch with the page's opening statements.
 */
export function pageBoundsSql(
  projection: ProjectionDefinition,
  schema: string,
  limit: number,
  until?: LogCheckpoint,
): string {
  const bound =
    until === undefined
      ? ''
      : `AND (e.transaction_id, e.position) <= ('${digits(until.transactionId)}'::xid8, ${digits(until.position)})`;
  return `SELECT c.transaction_id::text AS from_transaction_id, c.position::text AS from_position,
                 p.transaction_id::text AS transaction_id, p.position::text AS position,
                 coalesce(p.entries, 0) AS entries, coalesce(p.relevant, 0) AS relevant
            FROM ${schema}.checkpoint c LEFT JOIN LATERAL (
              SELECT page.transaction_id, page.position, count(*) OVER ()::int AS entries,
                     (count(*) FILTER (WHERE page.relevant) OVER ())::int AS relevant
                FROM (SELECT e.transaction_id, e.position, ${projection.events} AS relevant FROM event_log e
                       WHERE (e.transaction_id, e.position) > (c.transaction_id, c.position)
                         AND e.transaction_id < (SELECT event_log_horizon()) ${bound}
                       ORDER BY e.transaction_id, e.position LIMIT ${Math.trunc(limit)}) AS page
               ORDER BY page.transaction_id DESC, page.position DESC LIMIT 1) AS p ON true`;
}

function digits(value: string): string {
  if (!/^\d+$/.test(value)) throw new Error(`not a log position: ${value}`);
  return value;
}

/**
 * `sql` with each parameter `$n` replaced by `params[n-1]` as a literal: a statement without
 * parameters is planned for its values even on a session that plans prepared statements generically.
 */
export function withLiterals(sql: string, params: readonly string[]): string {
  return sql.replace(/\$(\d+)\b/g, (placeholder, n: string) => {
    const value = params[Number(n) - 1];
    if (value === undefined) throw new Error(`no value for ${placeholder}`);
    return pg.escapeLiteral(value);
  });
}

/** Up to this many entries, a page looks rows up by id; beyond, it joins whole tables (see ownerVersionsCte). */
export const SMALL_PAGE_ENTRIES = 5_000;

/**
 * Moves `schema`'s checkpoint from where the page began to where it ended, or fails (and so ends
 * the transaction in error) when another projector moved it meanwhile. A DO block, so it travels
 * in one batch with the COMMIT.
 */
export function moveCheckpointSql(
  projection: ProjectionDefinition,
  schema: string,
  from: LogCheckpoint,
  to: LogCheckpoint,
  entries: number,
): string {
  return `DO $$ BEGIN
        UPDATE ${schema}.checkpoint SET transaction_id = '${digits(to.transactionId)}'::xid8, position = ${digits(to.position)},
               applied = applied + ${Math.trunc(entries)}, updated_at = now()
         WHERE transaction_id = '${digits(from.transactionId)}'::xid8 AND position = ${digits(from.position)};
        IF NOT FOUND THEN RAISE EXCEPTION 'the ${projection.name} checkpoint moved under this projector'; END IF;
      END $$`;
}

/** Which entries a page statement applies, and the parameter holding the error it parks a missing subject with. */
export interface PageRange {
  /** A condition on `event_log e`; RANGE by default. */
  range: string;
  missingError: string;
}

const PROJECTOR_PAGE: PageRange = { range: RANGE, missingError: '$5' };

/**
 * One statement for the range ($1, $2) to ($3, $4) (or `page.range`): its changes are extracted
 * once (a materialized CTE), missing subjects parked with the error $5, and every table upserted
 * by its own data-modifying CTE; the types in `published` also write their changes. Answers `parked`.
 */
export function rangeSql(
  projection: ProjectionDefinition,
  schema: string,
  published: ReadonlySet<string>,
  smallPage: boolean,
  page: PageRange = PROJECTOR_PAGE,
): string {
  const upserts = projection.tables.map(({ type, table }) =>
    published.has(type)
      ? publishedChangesSql(
          schema,
          table,
          type,
          `SELECT id FROM changes WHERE type = '${type}' AND NOT missing`,
          upsertSql(`${schema}.${table}`, type),
        )
      : `${table} AS (${upsertSql(`${schema}.${table}`, type)}
         RETURNING t.id, t.owner_id)`,
  );
  return `WITH changes (${CHANGE_COLUMNS}) AS MATERIALIZED (${projection.changes(page.range)}),
       parked AS (
         INSERT INTO ${schema}.parked_events (position, event_id, error)
         SELECT DISTINCT position, event_id, ${page.missingError} FROM changes WHERE missing
         ON CONFLICT (position) DO NOTHING RETURNING 1),
       ${upserts.join(',\n       ')}${ownerVersionsCte(projection, schema, publishedTables(projection, published), smallPage)},
       ${notifiedSql([...publishedTables(projection, published)])}
       SELECT (SELECT count(*) FROM parked)::int AS parked, (SELECT count(*) FROM notified)::int AS notified`;
}

const ROW_COLUMNS = `id, owner_id, attributes, relationships, deleted, occurred_at, event_seq, event_id, position,
                               data_occurred_at, data_event_seq, data_event_id`;

/** Writes a row's newest change (version, `deleted`) and newest create/update (attributes) only when newer than the row's. */
function onConflict(): string {
  const newer = `${versionRow('excluded')} > ${versionRow('t')}`;
  const newerData = `excluded.data_event_id IS NOT NULL AND (t.data_event_id IS NULL OR ${versionRow('excluded', 'data_')} > ${versionRow('t', 'data_')})`;
  const pick = (column: string, condition: string) =>
    `${column} = CASE WHEN ${condition} THEN excluded.${column} ELSE t.${column} END`;
  return `ON CONFLICT (id) DO UPDATE SET
      ${['owner_id', 'deleted', 'occurred_at', 'event_seq', 'event_id', 'position'].map((c) => pick(c, newer)).join(',\n      ')},
      ${['attributes', 'relationships', 'data_occurred_at', 'data_event_seq', 'data_event_id'].map((c) => pick(c, newerData)).join(',\n      ')}
    WHERE ${newer} OR (${newerData})`;
}

/**
 * Per id, the range's newest change (deciding version and `deleted`) and its newest create/update
 * (deciding attributes) are written when newer than what the row has. The changes are sorted once:
 * an id's newest create/update is its newest change unless that is a destroy, and only the ids with
 * a destroy in the range have theirs sorted again (the order projection has none).
 */
function upsertSql(table: string, type: string): string {
  const ofType = `type = '${type}' AND NOT missing`;
  const data = (column: string) => `CASE WHEN v.deleted THEN d.${column} ELSE v.${column} END`;
  return `
    INSERT INTO ${table} AS t (${ROW_COLUMNS})
    SELECT v.id, v.owner_id, coalesce(${data('attributes')}, '{}'), coalesce(${data('relationships')}, '{}'), v.deleted,
           v.occurred_at, v.event_seq, v.event_id, v.position, ${['occurred_at', 'event_seq', 'event_id'].map(data).join(', ')}
      FROM (SELECT DISTINCT ON (id COLLATE "C") id, owner_id, deleted, occurred_at, event_seq, event_id, position,
                   attributes, relationships
              FROM changes WHERE ${ofType} ORDER BY id COLLATE "C", ${NEWEST_FIRST}) v
      LEFT JOIN (SELECT DISTINCT ON (id COLLATE "C") id, attributes, relationships, occurred_at, event_seq, event_id
                   FROM changes WHERE ${ofType} AND NOT deleted AND id IN (SELECT id FROM changes WHERE ${ofType} AND deleted)
                  ORDER BY id COLLATE "C", ${NEWEST_FIRST}) d USING (id)
    ${onConflict()}`;
}

/**
 * The same page (or `range`) by winners: the versions are sorted without payloads, and only each id's newest
 * create/update is parsed (by position). Nothing is written when a winner lacks its subject
 * (`missing` > 0): the caller then applies the page with the full statement.
 *
 * The versions are sorted once. An id's newest create/update is its newest change unless that is a
 * destroy; only the few ids whose newest change is a destroy have their versions sorted again. The
 * sort groups by byte order (COLLATE "C"): it only needs equal ids together, and so it compares
 * without the database's collation.
 */
export function winnersSql(
  projection: ProjectionDefinition,
  schema: string,
  published: ReadonlySet<string>,
  smallPage: boolean,
  range = RANGE,
): string {
  const byId = `type COLLATE "C", id COLLATE "C"`;
  const newest = `SELECT DISTINCT ON (${byId}) * FROM versions`;
  const newestFirst = `ORDER BY ${byId}, ${NEWEST_FIRST}`;
  const upserts = projection.tables.map(({ type, table }) => {
    const upsert = `
    INSERT INTO ${schema}.${table} AS t (${ROW_COLUMNS})
    SELECT v.id, v.owner_id, coalesce(r.attributes, '{}'), coalesce(r.relationships, '{}'), v.deleted, v.occurred_at,
           v.event_seq, v.event_id, v.position, w.occurred_at, w.event_seq, w.event_id
      FROM newest v LEFT JOIN newest_data w USING (type, id) LEFT JOIN resources r USING (type, id)
     WHERE v.type = '${type}' AND (SELECT complete FROM checked)
    ${onConflict()}`;
    return published.has(type)
      ? publishedChangesSql(schema, table, type, `SELECT id FROM newest WHERE type = '${type}'`, upsert)
      : `${table} AS (${upsert}
         RETURNING t.id, t.owner_id)`;
  });
  return `WITH versions (type, id, owner_id, occurred_at, event_seq, event_id, position, deleted) AS MATERIALIZED (${projection.winners!.versions(range)}),
       newest AS MATERIALIZED (${newest} ${newestFirst}),
       newest_data AS MATERIALIZED (
         SELECT * FROM newest WHERE NOT deleted
         UNION ALL
         (${newest} WHERE NOT deleted AND (type, id) IN (SELECT type, id FROM newest WHERE deleted) ${newestFirst})),
       resources (type, id, missing, attributes, relationships) AS MATERIALIZED (
         ${projection.winners!.resources('ARRAY(SELECT position FROM newest_data)')}),
       checked AS (SELECT NOT EXISTS (SELECT 1 FROM resources WHERE missing) AS complete),
       ${upserts.join(',\n       ')}${ownerVersionsCte(projection, schema, publishedTables(projection, published), smallPage)},
       ${notifiedSql([...publishedTables(projection, published)])}
       SELECT (SELECT count(*) FROM resources WHERE missing)::int AS missing, (SELECT count(*) FROM notified)::int AS notified`;
}

/** The tables of `projection` whose statement CTEs publish changes (and so have a `<table>_before`). */
function publishedTables(projection: ProjectionDefinition, published: ReadonlySet<string>): ReadonlySet<string> {
  return new Set(projection.tables.filter(({ type }) => published.has(type)).map(({ table }) => table));
}

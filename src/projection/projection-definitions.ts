import { SPEC_EVENT_NAMES } from '../domain/event-names.js';
import type { ResourceType } from '../domain/webhook-event.js';

export type ProjectionName = 'menu' | 'orders';

export interface ProjectionDefinition {
  name: ProjectionName;
  /** The schema holding the projection's tables, checkpoint and parked events. */
  schema: string;
  /** Identifies the projection in its advisory locks. */
  lockKey: number;
  tables: Array<{ type: ResourceType; table: string }>;
  /** SQL condition on an entry of `event_log e`: whether this projection reads it (a page of none only moves the checkpoint). */
  events: string;
  /** The event types `events` selects: an append of none of them does not wake the projection's lane. */
  eventTypes: ReadonlySet<string>;
  /**
   * SQL selecting this projection's resource changes from the entries of `event_log e` matching
   * `range`, reading the payload through `payload`: columns type, id, owner_id, occurred_at,
   * event_seq, event_id, position, deleted, missing, attributes, relationships. An event that
   * should change something but carries nothing to apply yields one row with `missing` = true.
   */
  changes(range: string, payload?: string): string;
  /**
   * When each event is about its subject alone (the menu): the page's versions without reading a
   * payload — columns type, id, owner_id, occurred_at, event_seq, event_id, position, deleted —
   * and, for the positions that win, their subject resource (type, id, missing, attributes,
   * relationships). Only winners are parsed. Absent: every payload goes through `changes`.
   */
  winners?: {
    versions(range: string): string;
    resources(positions: string): string;
  };
  /** Why a `missing` event is parked. */
  missingError: string;
}

export const CHANGE_COLUMNS =
  'type, id, owner_id, occurred_at, event_seq, event_id, position, deleted, missing, attributes, relationships';

/** The spec's events about a subject of `subjects` whose action passes `action`. */
function eventTypes(subjects: readonly string[], action: (action: string) => boolean): string[] {
  return SPEC_EVENT_NAMES.filter((name) => {
    const [subject, verb] = name.split('.');
    return subjects.includes(subject) && action(verb);
  });
}
/** `e.event_type IN (…)` for `names`. */
const eventTypesSql = (names: readonly string[]) => `e.event_type IN (${names.map((name) => `'${name}'`).join(', ')})`;
const MENU_SUBJECTS = ['collection', 'product', 'trait', 'trait_option'];
const MENU_UPSERT_TYPES = eventTypes(MENU_SUBJECTS, (action) => action !== 'destroyed');
const MENU_DESTROY_TYPES = eventTypes(MENU_SUBJECTS, (action) => action === 'destroyed');
const ORDER_TYPES = eventTypes(['order'], () => true);
const MENU_UPSERTS = eventTypesSql(MENU_UPSERT_TYPES);
const MENU_DESTROYS = eventTypesSql(MENU_DESTROY_TYPES);
const ORDER_EVENTS = eventTypesSql(ORDER_TYPES);

const CAST = 'e.payload::jsonb';
/** Each payload is parsed once (a lateral `doc`), then its `included` array read. */
const parsed = (payload: string) => `CROSS JOIN LATERAL (SELECT ${payload} AS doc OFFSET 0) AS parsed`;
const included = `CASE WHEN jsonb_typeof(parsed.doc -> 'included') = 'array' THEN parsed.doc -> 'included' ELSE '[]' END`;
/**
 * Whether `resource` (jsonb) is the event's subject: its type, and its id read as ingress reads it
 * (menu_sync_canonical_id, the SQL of src/event-log/canonical-id.ts), so that `1.0` is subject "1".
 */
const isSubject = (resource: string) => subjectTest(`${resource} ->> 'type'`, `${resource} -> 'id'`);
const subjectTest = (typeText: string, idJsonb: string) =>
  `${typeText} = e.subject_type AND menu_sync_canonical_id(${idJsonb}) = e.subject_id`;
/** The subject resource: usually `included[0]` (tested by path, without copying it out), else the first match in `included`. */
const subject = `CASE
  WHEN ${subjectTest(`parsed.doc #>> '{included,0,type}'`, `parsed.doc #> '{included,0,id}'`)} THEN parsed.doc #> '{included,0}'
  ELSE (SELECT resource FROM jsonb_array_elements(${included}) AS resource WHERE ${isSubject('resource')} LIMIT 1) END`;

/**
 * The version of a log entry `e` (docs/reference.md §4, the order of src/domain/version.ts): its occurrence
 * time, then its sequence number (none is lowest), then its event id compared bytewise. Every
 * projection selects these three columns so; compared in that order, by NEWEST_FIRST or as a row.
 */
const ENTRY_VERSION = `e.occurred_at, coalesce(e.event_seq, '-Infinity'), e.event_id COLLATE "C"`;
/** Rows carrying a version as ENTRY_VERSION selects it (occurred_at, event_seq, event_id), newest first. */
export const NEWEST_FIRST = 'occurred_at DESC, event_seq DESC, event_id DESC';
/** The same version as a row value, to compare two rows' versions: `versionRow('excluded') > versionRow('t')`; `prefix` names the data_ columns. */
export const versionRow = (alias: string, prefix = '') =>
  `(${alias}.${prefix}occurred_at, ${alias}.${prefix}event_seq, ${alias}.${prefix}event_id)`;

/** A menu event's resource and version: each is about its subject alone. */
const MENU_VERSION = `e.subject_type, e.subject_id, e.owner_id, ${ENTRY_VERSION}, e.position`;
/**
 * The payload of `event_log e` parsed once, and the event's subject resource taken from it
 * (`subject.resource`, NULL when missing): the one subject lookup of the projector and of `as_of`.
 */
export const subjectOf = (payload: string) => `${parsed(payload)}
      CROSS JOIN LATERAL (SELECT ${subject} AS resource OFFSET 0) AS subject`;

/**
 * The menu projection: a `*.created`/`*.updated` event yields its subject from `included`;
 * a `*.destroyed` event yields a tombstone.
 */
export const MENU_PROJECTION: ProjectionDefinition = {
  name: 'menu',
  schema: 'proj_menu',
  lockKey: 1,
  tables: [
    { type: 'collection', table: 'collections' },
    { type: 'product', table: 'products' },
    { type: 'trait', table: 'traits' },
    { type: 'trait_option', table: 'trait_options' },
  ],
  events: `(${MENU_UPSERTS} OR ${MENU_DESTROYS})`,
  eventTypes: new Set([...MENU_UPSERT_TYPES, ...MENU_DESTROY_TYPES]),
  changes: (range, payload = CAST) => `
    SELECT ${MENU_VERSION}, false, subject.resource IS NULL, subject.resource -> 'attributes', subject.resource -> 'relationships'
      FROM event_log e ${subjectOf(payload)}
     WHERE ${MENU_UPSERTS} AND ${range}
    UNION ALL
    SELECT ${MENU_VERSION}, true, false, NULL, NULL
      FROM event_log e
     WHERE ${MENU_DESTROYS} AND ${range}`,
  winners: {
    versions: (range) => `
      SELECT ${MENU_VERSION}, ${MENU_DESTROYS}
        FROM event_log e
       WHERE (${MENU_UPSERTS} OR ${MENU_DESTROYS}) AND ${range}`,
    resources: (positions) => `
      SELECT e.subject_type, e.subject_id, subject.resource IS NULL, subject.resource -> 'attributes', subject.resource -> 'relationships'
        FROM event_log e ${subjectOf(CAST)}
       WHERE e.position = ANY (${positions})`,
  },
  missingError: 'the event does not include its subject resource',
};

/** The orders projection: an order event upserts the order, order products, their trait options and the store. */
export const ORDERS_PROJECTION: ProjectionDefinition = {
  name: 'orders',
  schema: 'proj_orders',
  lockKey: 2,
  tables: [
    { type: 'order', table: 'orders' },
    { type: 'order_product', table: 'order_products' },
    { type: 'order_product_trait_option', table: 'order_product_trait_options' },
    { type: 'store', table: 'stores' },
  ],
  events: ORDER_EVENTS,
  eventTypes: new Set(ORDER_TYPES),
  changes: (range, payload = CAST) => `
    SELECT resource ->> 'type', menu_sync_canonical_id(resource -> 'id'), e.owner_id, ${ENTRY_VERSION}, e.position, false, resource IS NULL,
           coalesce(resource -> 'attributes', '{}'), coalesce(resource -> 'relationships', '{}')
      FROM event_log e
      ${parsed(payload)}
      LEFT JOIN LATERAL (SELECT resource FROM jsonb_array_elements(${included}) AS resource
                          WHERE resource ->> 'type' IN ('order', 'order_product', 'order_product_trait_option', 'store')
                            AND menu_sync_canonical_id(resource -> 'id') IS NOT NULL) AS found ON true
     WHERE ${ORDER_EVENTS} AND ${range}`,
  missingError: 'the order event includes no order resources',
};

/**
 * The schema of a projection's archive base (migration 1767200000000): its tables folded from the
 * archived partitions alone, read by `as_of` once part of the log is archived.
 */
export const archiveBaseOf = (schema: string) => `${schema}__archive_base`;

export const PROJECTIONS: readonly ProjectionDefinition[] = [MENU_PROJECTION, ORDERS_PROJECTION];

export function projectionByName(name: string): ProjectionDefinition | undefined {
  return PROJECTIONS.find((projection) => projection.name === name);
}

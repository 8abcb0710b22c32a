import { linkedIds, resourceJson } from '../query/resource-sql.js';

export type MenuForm = 'expanded' | 'normalized';

/**
 * Each section of the document: its key and the query giving its items (JSON text) in id order
 * ($1: the owner); with `traits`, the items are products whose `traits` ids are spliced in from
 * the docs that query gives for them ($1: trait ids).
 */
export interface MenuSection {
  key: string;
  sql: string;
  traits?: string;
}

/** A table's rows and the conditions they meet, kept apart so that a query can join more rows to them before its WHERE. */
interface Rows {
  from: string;
  where: string;
}

/** `rows` as what a FROM reads, with `joins` after the table. */
const fromRows = (rows: Rows, ...joins: string[]) => [rows.from, ...joins, 'WHERE', rows.where].join(' ');

/** A join of `rows` (a subquery that may name the tables before it) as `alias`. */
const lateral = (rows: string, alias: string) => `CROSS JOIN LATERAL ${rows} ${alias}`;

const LIVE_PRODUCTS: Rows = { from: 'proj_menu.products p', where: 'p.owner_id = $1 AND NOT p.deleted' };

/** The live traits the owner's live products name. */
const REFERENCED_TRAITS: Rows = {
  from: 'proj_menu.traits t',
  where: `NOT t.deleted
  AND t.id IN (SELECT tl.id FROM ${fromRows(LIVE_PRODUCTS, lateral(linkedIds('p.relationships', 'traits'), 'tl'))})`,
};

/** The trait options of trait `t` in relationship order, unknown and deleted ones left out. */
const TRAIT_OPTIONS = `, 'trait_options', coalesce((
    SELECT json_agg(${resourceJson('o', 'trait_option')} ORDER BY ol.ord)
      FROM ${linkedIds('t.relationships', 'trait_options')} ol JOIN proj_menu.trait_options o ON o.id = ol.id AND NOT o.deleted), '[]'::json)`;

const COLLECTIONS: MenuSection = {
  key: 'collections',
  sql: `SELECT ${resourceJson('c', 'collection')}::text AS doc FROM proj_menu.collections c
        WHERE c.owner_id = $1 AND NOT c.deleted ORDER BY c.sort_key`,
};

/**
 * Products expanded: each product without its traits (`sql`, with the ids it names in order), and
 * each trait the products name built once by PostgreSQL with its options (`traits`, looked up by
 * the ids a chunk of products names that no earlier chunk did); the process splices the trait
 * texts in (repeats kept, unknown and deleted ones left out). Expanded, a large menu is mostly
 * repeated trait text: built that way, the duplicated text is neither built by
 * PostgreSQL nor sent by it, only written out. Looking traits up by the ids the products already
 * carry costs an index lookup each, far less than a join over every product's relationships.
 */
const EXPANDED_PRODUCTS: MenuSection = {
  key: 'products',
  sql: `SELECT ${resourceJson('p', 'product')}::text AS doc,
               ARRAY(SELECT tl.id FROM ${linkedIds('p.relationships', 'traits')} tl ORDER BY tl.ord) AS traits
          FROM ${fromRows(LIVE_PRODUCTS)} ORDER BY p.sort_key`,
  traits: `SELECT t.id, ${resourceJson('t', 'trait', TRAIT_OPTIONS)}::text AS doc
             FROM proj_menu.traits t WHERE t.id = ANY($1::text[]) AND NOT t.deleted`,
};

const SECTIONS: Record<MenuForm, MenuSection[]> = {
  expanded: [COLLECTIONS, EXPANDED_PRODUCTS],
  normalized: [
    COLLECTIONS,
    {
      key: 'products',
      sql: `SELECT ${resourceJson('p', 'product')}::text AS doc FROM ${fromRows(LIVE_PRODUCTS)} ORDER BY p.sort_key`,
    },
    {
      key: 'traits',
      sql: `SELECT ${resourceJson('t', 'trait')}::text AS doc FROM ${fromRows(REFERENCED_TRAITS)} ORDER BY t.sort_key`,
    },
    {
      key: 'trait_options',
      sql: `SELECT ${resourceJson('o', 'trait_option')}::text AS doc FROM proj_menu.trait_options o
        WHERE NOT o.deleted AND o.id IN (SELECT ol.id FROM ${fromRows(REFERENCED_TRAITS, lateral(linkedIds('t.relationships', 'trait_options'), 'ol'))})
        ORDER BY o.sort_key`,
    },
  ],
};

/** The section queries of a form ($1: the owner), as the daemon runs them (for bench/: the baseline and EXPLAIN snapshots). */
export function menuSections(form: MenuForm): ReadonlyArray<MenuSection> {
  return SECTIONS[form];
}

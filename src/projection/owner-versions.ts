import type { ProjectionDefinition } from './projection-definitions.js';

/**
 * The menu's per-owner version (`/menu`'s ETag), kept in the page's own statement: one
 * data-modifying CTE giving every owner whose rows the statement changed a new version. It reads the
 * upsert CTEs (named after the tables, each `RETURNING id, owner_id`) for the new owners, and the
 * rows as they were before the statement for the owners those rows had, so a resource moved to
 * another owner changes both menus. Rows an older event left alone return nothing and bump nothing.
 * Versions come from a sequence outside the schema: a rebuilt schema swapped in never repeats one.
 * Other projections have none (an empty string).
 *
 * The rows as they were: a published table's `<table>_before` CTE holds them already (see
 * publishedChangesSql); otherwise the table itself, which a statement sees as it was before it,
 * looked up by id for a small page and joined for a large one. (A join reads the whole table: per
 * page of a few deliveries that was half of the projector's time, and freshness suffered.)
 */
export function ownerVersionsCte(
  projection: ProjectionDefinition,
  schema: string,
  before: ReadonlySet<string>,
  smallPage: boolean,
): string {
  if (projection.name !== 'menu') return '';
  const previousOwners = (table: string) =>
    before.has(table)
      ? `SELECT o.owner_id FROM ${table}_before o JOIN ${table} c USING (id)`
      : smallPage
        ? `SELECT o.owner_id FROM ${schema}.${table} o WHERE o.id = ANY (ARRAY(SELECT id FROM ${table}))`
        : `SELECT o.owner_id FROM ${schema}.${table} o JOIN ${table} c USING (id)`;
  const touched = projection.tables.map(({ table }) => `SELECT owner_id FROM ${table} UNION ${previousOwners(table)}`);
  return `,
       owner_versions AS (
         INSERT INTO ${schema}.owner_versions AS v (owner_id, version)
         SELECT owner_id, nextval('menu_owner_version_seq') FROM (${touched.join('\n           UNION ')}) AS touched
          WHERE owner_id IS NOT NULL
         ON CONFLICT (owner_id) DO UPDATE SET version = excluded.version)`;
}

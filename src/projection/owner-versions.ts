import type { ProjectionDefinition } from './projection-definitions.js';

/**
 * The menu's per-owner version (`/menu`'s ETag), kept in the page's own statement: one
 * data-modifying CTE giving every owner whose rows the statement changed a new version. It reads the
 * upsert CTEs (named after the tables, each `RETURNING id, owner_id`) for the new owners, and the
 * tables themselves — which a statement sees as they were before it — for the owners those rows
 * had, so a resource moved to another owner changes both menus. Rows an older event left alone
 * return nothing and bump nothing. Versions come from a sequence outside the schema: a rebuilt
 * schema swapped in never repeats one. Other projections have none (an empty string).
 */
export function ownerVersionsCte(projection: ProjectionDefinition, schema: string): string {
  if (projection.name !== 'menu') return '';
  const touched = projection.tables.map(({ table }) =>
    `SELECT owner_id FROM ${table} UNION SELECT o.owner_id FROM ${schema}.${table} o JOIN ${table} c USING (id)`);
  return `,
       owner_versions AS (
         INSERT INTO ${schema}.owner_versions AS v (owner_id, version)
         SELECT owner_id, nextval('menu_owner_version_seq') FROM (${touched.join('\n           UNION ')}) AS touched
          WHERE owner_id IS NOT NULL
         ON CONFLICT (owner_id) DO UPDATE SET version = excluded.version)`;
}

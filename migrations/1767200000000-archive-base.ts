import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Each projection's resource tables, and what its page statement writes beside them. */
const BASES: ReadonlyArray<{ schema: string; tables: readonly string[] }> = [
  {
    schema: 'proj_menu',
    tables: ['parked_events', 'owner_versions', 'collections', 'products', 'traits', 'trait_options'],
  },
  {
    schema: 'proj_orders',
    tables: ['parked_events', 'orders', 'order_products', 'order_product_trait_options', 'stores'],
  },
];

/**
 * The archive base (docs/reference.md §8, The archive base): per projection, a schema
 * `<schema>__archive_base` with the same tables, into which the archive folds every partition it
 * drops (src/archive/archive-base.ts), so that an `as_of` at or after the archive horizon reads
 * each resource's newest archived version there. A later migration that changes a projection's
 * tables changes its base the same way.
 */
export class ArchiveBase1767200000000 implements MigrationInterface {
  name = 'ArchiveBase1767200000000';

  async up(runner: QueryRunner): Promise<void> {
    for (const { schema, tables } of BASES) {
      await runner.query(`CREATE SCHEMA ${schema}__archive_base`);
      for (const table of tables)
        await runner.query(`CREATE TABLE ${schema}__archive_base.${table} (LIKE ${schema}.${table} INCLUDING ALL)`);
    }
  }

  async down(runner: QueryRunner): Promise<void> {
    for (const { schema } of BASES) await runner.query(`DROP SCHEMA ${schema}__archive_base CASCADE`);
  }
}

import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Reads that cost what they return (issue 13).
 * - `event_log_subject_version_idx`: the newest event of one subject up to an instant is the first
 *   entry of an index range walked backwards, read from the index alone (`as_of`); its column order
 *   and collation are those of the version rule (occurred_at, event_seq with NULL lowest, event_id bytewise).
 * - `proj_menu.owner_versions`: a per-owner menu version, bumped by the projector in the page's
 *   statement for every owner whose rows it changed; `/menu`'s ETag. Values come from a sequence
 *   outside the projection's schema, so a rebuilt schema swapped in never repeats a version.
 */
export class QueryScale1764100000000 implements MigrationInterface {
  name = 'QueryScale1764100000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE INDEX event_log_subject_version_idx ON event_log
        (subject_type, subject_id, occurred_at, event_seq NULLS FIRST, event_id COLLATE "C") INCLUDE (position, owner_id, event_type)`);
    // Its exception handler is a subtransaction, which no query in parallel mode (leader included) may start.
    await runner.query(`ALTER FUNCTION menu_sync_jsonb(json) PARALLEL UNSAFE`);
    await runner.query(`CREATE SEQUENCE menu_owner_version_seq`);
    await runner.query(`
      CREATE TABLE proj_menu.owner_versions (
        owner_id text PRIMARY KEY,
        version  bigint NOT NULL
      )`);
    await runner.query(`
      INSERT INTO proj_menu.owner_versions (owner_id, version)
      SELECT owner_id, nextval('menu_owner_version_seq') FROM (
        SELECT owner_id FROM proj_menu.collections UNION SELECT owner_id FROM proj_menu.products
        UNION SELECT owner_id FROM proj_menu.traits UNION SELECT owner_id FROM proj_menu.trait_options) AS owners
       WHERE owner_id IS NOT NULL`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE proj_menu.owner_versions`);
    await runner.query(`DROP SEQUENCE menu_owner_version_seq`);
    await runner.query(`ALTER FUNCTION menu_sync_jsonb(json) PARALLEL SAFE`);
    await runner.query(`DROP INDEX event_log_subject_version_idx`);
  }
}

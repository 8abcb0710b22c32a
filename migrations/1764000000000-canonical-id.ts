import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * menu_sync_canonical_id(jsonb): the reading of a resource id that ingress applies in TypeScript
 * (src/event-log/canonical-id.ts), for the projector and `as_of` to find an event's subject in
 * `included` exactly as ingress did: a string as it is; an integral number as its integer in
 * decimal (jsonb keeps `1.0` as numeric 1.0, whose `->>` text is "1.0"); anything else NULL.
 * Plain SQL, IMMUTABLE: the planner inlines it, and a string id costs one jsonb_typeof more than `->>`.
 */
export class CanonicalId1764000000000 implements MigrationInterface {
  name = 'CanonicalId1764000000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE FUNCTION menu_sync_canonical_id(id jsonb) RETURNS text
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT CASE jsonb_typeof(id)
          WHEN 'string' THEN id #>> '{}'
          WHEN 'number' THEN CASE WHEN id::numeric = trunc(id::numeric) AND abs(id::numeric) < 1e255
                                  THEN trunc(id::numeric)::text END
        END
      $$`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP FUNCTION menu_sync_canonical_id(jsonb)`);
  }
}

import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A change's resource as JSON text in the API's key order (jsonb sorts keys), for the push sinks,
 * which send it as PostgreSQL writes it and never parse it. The row types mirror the parameters of
 * `menu_sync_resource`, the one constructor of the change log's resources, so the round trip
 * through them changes no value.
 */
export class ChangeJson1765300000000 implements MigrationInterface {
  name = 'ChangeJson1765300000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TYPE menu_sync_resource_version AS (event_id text, occurred_at text, position bigint)`);
    await runner.query(
      `CREATE TYPE menu_sync_resource_fields AS (type text, id text, owner_id text, attributes jsonb,
         relationships jsonb, version menu_sync_resource_version, deleted boolean)`,
    );
    await runner.query(`
      CREATE FUNCTION menu_sync_resource_json(resource jsonb) RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
        SELECT row_to_json(jsonb_populate_record(NULL::menu_sync_resource_fields, resource))::text
      $$`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP FUNCTION menu_sync_resource_json(jsonb)`);
    await runner.query(`DROP TYPE menu_sync_resource_fields`);
    await runner.query(`DROP TYPE menu_sync_resource_version`);
  }
}

import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Room on each page so that updating a resource (its indexed columns unchanged) can stay on the page (HOT). */
const RESOURCE_FILLFACTOR = 80;

const TABLES: Record<string, string> = {
  collections: 'proj_menu',
  products: 'proj_menu',
  traits: 'proj_menu',
  trait_options: 'proj_menu',
  orders: 'proj_orders',
  order_products: 'proj_orders',
  order_product_trait_options: 'proj_orders',
  stores: 'proj_orders',
};

/**
 * The read model: one schema per projection (proj_menu, proj_orders) holding its resource tables,
 * its checkpoint and its parked events, so that a rebuild can fill a copy of the schema and swap
 * it in by renaming. Relationships stay in their jsonb: expansion reads a row's to-many ids there
 * and fetches the related rows by primary key. A resource row keeps its newest event's version (which decides `deleted`)
 * and, separately, the version of its newest create/update (whose attributes it shows).
 * menu_sync_jsonb is a cast that gives NULL for JSON that jsonb refuses (`\u0000`), for reads
 * that must not fail on an event the projector parked.
 */
export class ReadModel1763800000000 implements MigrationInterface {
  name = 'ReadModel1763800000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE FUNCTION menu_sync_jsonb(document json) RETURNS jsonb
      LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
      BEGIN
        RETURN document::jsonb;
      EXCEPTION WHEN others THEN
        RETURN NULL;
      END $$`);
    await runner.query(`
      CREATE FUNCTION menu_sync_sort_key(id text) RETURNS text
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT CASE WHEN id ~ '^[0-9]{1,30}$' THEN '0' || lpad(id, 30, '0') ELSE '1' || id END
      $$`);
    for (const schema of ['proj_menu', 'proj_orders']) {
      await runner.query(`CREATE SCHEMA ${schema}`);
      await runner.query(`
        CREATE TABLE ${schema}.checkpoint (
          singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
          transaction_id xid8 NOT NULL DEFAULT '0',
          position       bigint NOT NULL DEFAULT 0,
          applied        bigint NOT NULL DEFAULT 0,
          updated_at     timestamptz NOT NULL DEFAULT now()
        )`);
      await runner.query(`INSERT INTO ${schema}.checkpoint DEFAULT VALUES`);
      await runner.query(`
        CREATE TABLE ${schema}.parked_events (
          position  bigint PRIMARY KEY,
          event_id  text NOT NULL,
          error     text NOT NULL,
          parked_at timestamptz NOT NULL DEFAULT now()
        )`);
    }
    for (const [table, schema] of Object.entries(TABLES)) {
      await runner.query(`
        CREATE TABLE ${schema}.${table} (
          id               text PRIMARY KEY,
          sort_key         text COLLATE "C" GENERATED ALWAYS AS (menu_sync_sort_key(id)) STORED,
          owner_id         text,
          attributes       jsonb NOT NULL DEFAULT '{}',
          relationships    jsonb NOT NULL DEFAULT '{}',
          deleted          boolean NOT NULL,
          occurred_at      timestamptz NOT NULL,
          event_seq        numeric NOT NULL,
          event_id         text COLLATE "C" NOT NULL,
          position         bigint NOT NULL,
          data_occurred_at timestamptz,
          data_event_seq   numeric,
          data_event_id    text COLLATE "C"
        ) WITH (fillfactor = ${RESOURCE_FILLFACTOR})`);
      await runner.query(`CREATE INDEX ${table}_sort_idx ON ${schema}.${table} (sort_key)`);
      await runner.query(`CREATE INDEX ${table}_owner_sort_idx ON ${schema}.${table} (owner_id, sort_key)`);
    }
    await runner.query(`CREATE INDEX event_log_occurred_idx ON event_log (subject_type, occurred_at)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX event_log_occurred_idx`);
    await runner.query(`DROP SCHEMA proj_orders CASCADE`);
    await runner.query(`DROP SCHEMA proj_menu CASCADE`);
    await runner.query(`DROP FUNCTION menu_sync_sort_key(text)`);
    await runner.query(`DROP FUNCTION menu_sync_jsonb(json)`);
  }
}

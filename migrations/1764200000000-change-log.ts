import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The change log (docs/reference.md §11): one row per resource whose visible state changed, written in the
 * transaction that changed the read model (an outbox). Readers read it gap-safely like the event
 * log: in (transaction_id, seq) order, below event_log_horizon(). `change_log_horizon` records the
 * highest (transaction_id, seq) that compaction deleted: a cursor below it answers 410.
 * menu_sync_resource() builds a resource exactly as `GET /api/v1/{type}/{id}` shows it (the
 * top-level key order aside, which jsonb does not keep; readers restore it).
 */
export class ChangeLog1764200000000 implements MigrationInterface {
  name = 'ChangeLog1764200000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE change_log (
        seq            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
        change_id      text NOT NULL,
        type           text NOT NULL,
        id             text NOT NULL,
        owner_id       text,
        op             text NOT NULL,
        resource       jsonb NOT NULL,
        at             timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT change_log_change_id_key UNIQUE (change_id),
        CONSTRAINT change_log_op_check CHECK (op IN ('upsert', 'delete'))
      )`);
    // The only secondary index: every index costs the projector's page statement (see bench/change-log.js).
    // Compaction, which runs rarely, scans the table instead.
    await runner.query(`CREATE INDEX change_log_reader_idx ON change_log (transaction_id, seq)`);
    await runner.query(`
      CREATE TABLE change_log_horizon (
        singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        transaction_id xid8 NOT NULL DEFAULT '0',
        seq            bigint NOT NULL DEFAULT 0,
        compacted_at   timestamptz
      )`);
    await runner.query(`INSERT INTO change_log_horizon DEFAULT VALUES`);
    await runner.query(`
      CREATE FUNCTION menu_sync_resource(r_type text, r_id text, r_owner_id text, r_attributes jsonb, r_relationships jsonb,
                                         r_event_id text, r_occurred_at timestamptz, r_position bigint, r_deleted boolean)
      RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT jsonb_build_object(
          'type', r_type, 'id', r_id, 'owner_id', r_owner_id, 'attributes', r_attributes, 'relationships', r_relationships,
          'version', jsonb_build_object(
            'event_id', r_event_id,
            'occurred_at', to_char(r_occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
            'position', r_position),
          'deleted', r_deleted)
      $$`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(
      `DROP FUNCTION menu_sync_resource(text, text, text, jsonb, jsonb, text, timestamptz, bigint, boolean)`,
    );
    await runner.query(`DROP TABLE change_log_horizon`);
    await runner.query(`DROP TABLE change_log`);
  }
}

import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The append-only event log, the quarantine of rejected deliveries and the webhook keys.
 * `transaction_id` lets readers read gap-safely (see EventLogRepository.readAfter).
 * `payload` is `json` (text, validated) rather than `jsonb`: it keeps every valid JSON document,
 * including `\u0000` escapes and lone surrogates, and inserts several times cheaper.
 * `raw_body` is kept only when the received bytes are not the UTF-8 of `payload` (a BOM, another
 * charset); otherwise the exact bytes are the payload's own. Webhook keys are secrets, and the
 * platform's events carry the callback URI, key included: the stored bytes have each occurrence
 * replaced by `[redacted]`, `raw_key_at` lists where (byte offsets) and `raw_key` holds the key
 * sealed (AES-256-GCM), so /raw restores the exact bytes. A key found only in the decoded text of
 * another charset (UTF-16) makes the whole body sealed instead (`raw_sealed`).
 */
export class EventLog1763700000000 implements MigrationInterface {
  name = 'EventLog1763700000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE event_log (
        position       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
        event_id       text NOT NULL,
        event_type     text NOT NULL,
        subject_type   text NOT NULL,
        subject_id     text NOT NULL,
        owner_id       text,
        occurred_at    timestamptz NOT NULL,
        event_seq      numeric,
        source         text NOT NULL,
        handled        boolean NOT NULL,
        received_at    timestamptz NOT NULL,
        key_id         text,
        content_type   text,
        payload        json NOT NULL,
        raw_body       bytea,
        raw_sealed     boolean NOT NULL DEFAULT false,
        raw_key        bytea,
        raw_key_at     integer[],
        sha256         bytea NOT NULL,
        CONSTRAINT event_log_event_id_key UNIQUE (event_id),
        CONSTRAINT event_log_raw_sealed_check CHECK (NOT raw_sealed OR raw_body IS NOT NULL),
        CONSTRAINT event_log_raw_key_check CHECK ((raw_key IS NULL) = (raw_key_at IS NULL) AND NOT (raw_sealed AND raw_key IS NOT NULL)),
        CONSTRAINT event_log_source_check CHECK (source IN ('webhook', 'reconcile', 'import'))
      )`);
    await runner.query(`CREATE INDEX event_log_transaction_position_idx ON event_log (transaction_id, position)`);
    await runner.query(`CREATE INDEX event_log_subject_idx ON event_log (subject_type, subject_id, position)`);
    // The orders projection reads only order events (a few percent of the log) in reader order.
    await runner.query(`CREATE INDEX event_log_order_events_idx ON event_log (transaction_id, position)
      WHERE event_type IN ('order.created', 'order.updated')`);
    await runner.query(`
      DO $$ BEGIN
        ALTER TABLE event_log ALTER COLUMN payload SET COMPRESSION lz4;
        ALTER TABLE event_log ALTER COLUMN raw_body SET COMPRESSION lz4;
      EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
        RAISE NOTICE 'lz4 compression unavailable, keeping the default';
      END $$`);
    await runner.query(`
      CREATE FUNCTION event_log_reject_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'event_log is append-only: % is not allowed', TG_OP
          USING ERRCODE = 'insufficient_privilege';
      END $$`);
    await runner.query(`
      CREATE TRIGGER event_log_append_only BEFORE UPDATE OR DELETE ON event_log
        FOR EACH ROW EXECUTE FUNCTION event_log_reject_change()`);
    await runner.query(`
      CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON event_log
        FOR EACH STATEMENT EXECUTE FUNCTION event_log_reject_change()`);

    // Gap-safe readers read below this: the oldest transaction still in progress, except those that
    // pg_stat_activity shows belong to other databases (they cannot have written this log), so a
    // long transaction elsewhere on the server does not hold the projector back. A transaction not
    // (yet) shown there counts as possibly ours: the horizon errs low, never high.
    await runner.query(`
      CREATE FUNCTION event_log_horizon() RETURNS xid8 LANGUAGE sql STABLE AS $$
        SELECT coalesce(
          (SELECT min(x) FROM pg_snapshot_xip(pg_current_snapshot()) AS x
            WHERE (x::text::numeric % 4294967296)::bigint NOT IN (
              SELECT backend_xid::text::bigint FROM pg_stat_activity
               WHERE backend_xid IS NOT NULL AND datname IS DISTINCT FROM current_database())),
          pg_snapshot_xmax(pg_current_snapshot()))
      $$`);

    await runner.query(`
      CREATE TABLE quarantine (
        id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        received_at  timestamptz NOT NULL,
        status       smallint NOT NULL,
        reason       text NOT NULL,
        field        text,
        key_id       text,
        content_type text,
        sha256       bytea NOT NULL,
        body         bytea NOT NULL
      )`);

    await runner.query(`
      CREATE TABLE webhook_keys (
        id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        key_hash      bytea NOT NULL UNIQUE,
        connection_id bigint,
        created_at    timestamptz NOT NULL DEFAULT now(),
        expires_at    timestamptz
      )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE webhook_keys`);
    await runner.query(`DROP TABLE quarantine`);
    await runner.query(`DROP TABLE event_log`);
    await runner.query(`DROP FUNCTION event_log_reject_change()`);
    await runner.query(`DROP FUNCTION event_log_horizon()`);
  }
}

import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Push sinks of the change log (docs/reference.md §11). A sink's secrets exist here only as AES-256-GCM
 * ciphertext bound to the sink's id and column (the id is drawn by the application before the
 * insert). `(cursor_xid, cursor_seq)` is the change-log position its target acknowledged up to
 * ((0, 0): from the start); `(inflight_xid, inflight_seq)` the end of the batch being retried, so a
 * retry sends the same batch under the same `webhook-id`; `epoch` counts replays, so a replayed
 * batch gets a new `webhook-id` (a receiver deduplicating by it must not drop a replay).
 */
export class Sinks1764300000000 implements MigrationInterface {
  name = 'Sinks1764300000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE sinks (
        id                          uuid PRIMARY KEY,
        kind                        text NOT NULL CHECK (kind IN ('http', 'nats')),
        url                         text,
        stream                      text,
        subject_prefix              text,
        types                       text[],
        owner_ids                   text[],
        batch_size                  integer NOT NULL DEFAULT 100 CHECK (batch_size BETWEEN 1 AND 10000),
        timeout_ms                  integer NOT NULL DEFAULT 15000 CHECK (timeout_ms BETWEEN 100 AND 300000),
        cursor_xid                  xid8 NOT NULL DEFAULT '0',
        cursor_seq                  bigint NOT NULL DEFAULT 0,
        state                       text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'retrying', 'disabled', 'failing')),
        failing_since               timestamptz,
        last_success_at             timestamptz,
        last_error                  text,
        next_attempt_at             timestamptz,
        attempts                    integer NOT NULL DEFAULT 0,
        epoch                       integer NOT NULL DEFAULT 0,
        inflight_xid                xid8,
        inflight_seq                bigint,
        secret                      bytea,
        previous_secret             bytea,
        previous_secret_expires_at  timestamptz,
        created_at                  timestamptz NOT NULL DEFAULT now(),
        updated_at                  timestamptz NOT NULL DEFAULT now(),
        CHECK ((kind = 'http') = (url IS NOT NULL AND secret IS NOT NULL)),
        CHECK ((kind = 'nats') = (stream IS NOT NULL AND subject_prefix IS NOT NULL))
      )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE IF EXISTS sinks`);
  }
}

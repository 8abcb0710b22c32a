import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What every delivery attempt of a sink sent and what its target answered (docs/reference.md §12),
 * newest first by `id`. `status` is JSON: the HTTP or JetStream code as a number, a database's
 * error code as a string (SQLSTATE `23505` is no number). Rows go with their sink, and the
 * retention job keeps at most SINK_ATTEMPTS_RETENTION and 1,000 per sink.
 */
export class SinkAttempts1764800000000 implements MigrationInterface {
  name = 'SinkAttempts1764800000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE menu_sync_sink_attempts (
        id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        sink_id      uuid NOT NULL REFERENCES sinks (id) ON DELETE CASCADE,
        at           timestamptz NOT NULL,
        first_seq    bigint,
        last_seq     bigint,
        changes      integer NOT NULL,
        webhook_id   text,
        outcome      text NOT NULL CHECK (outcome IN ('ok', 'retry', 'disabled')),
        status       jsonb NOT NULL,
        duration_ms  integer NOT NULL,
        error        text,
        response     text
      )`);
    await runner.query(`CREATE INDEX menu_sync_sink_attempts_newest ON menu_sync_sink_attempts (sink_id, id DESC)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE IF EXISTS menu_sync_sink_attempts`);
  }
}

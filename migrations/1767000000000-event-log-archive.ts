import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The event log's archive (docs/reference.md §8, The archive): one row per closed partition
 * exported to ARCHIVE_DIR, with what its manifest entry says. A partition is `exported` once its
 * file was written, read back and found equal to it; `archived` once it was detached and dropped
 * (in the same transaction as this row's change); `restored` once it was attached again from its
 * file. The archive horizon is the highest `upper_bound` of the `archived` rows: a position below
 * it is in the archive unless a `restored` row's range holds it.
 */
export class EventLogArchive1767000000000 implements MigrationInterface {
  name = 'EventLogArchive1767000000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE event_log_archives (
        id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        partition_name    text NOT NULL,
        lower_bound       bigint NOT NULL,
        upper_bound       bigint NOT NULL,
        first_position    bigint,
        last_position     bigint,
        events            bigint NOT NULL,
        first_occurred_at timestamptz,
        last_occurred_at  timestamptz,
        first_received_at timestamptz,
        last_received_at  timestamptz,
        file              text NOT NULL,
        bytes             bigint NOT NULL,
        sha256            text NOT NULL,
        events_sha256     text NOT NULL,
        checkpoint_position bigint,
        state             text NOT NULL,
        created_at        timestamptz NOT NULL DEFAULT now(),
        archived_at       timestamptz,
        restored_at       timestamptz,
        CONSTRAINT event_log_archives_state_check CHECK (state IN ('exported', 'archived', 'restored')),
        CONSTRAINT event_log_archives_bounds_check CHECK (lower_bound < upper_bound)
      )`);
    await runner.query(`CREATE INDEX event_log_archives_bounds_idx ON event_log_archives (upper_bound)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE event_log_archives`);
  }
}

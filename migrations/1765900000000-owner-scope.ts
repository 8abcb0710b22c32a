import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What a token scoped to owners reads (docs/reference.md §12, Owner scope):
 * - the quarantine keeps the owner a rejected delivery names, when it can be read; entries kept
 *   from before have none, and so are shown to tokens of every owner only;
 * - the event log is walked by owner in position order (`/api/v1/events` of a scoped token, and
 *   the owners' list), not filtered from a walk of every entry.
 * The log's index is built CONCURRENTLY, so appends go on while it is built; that needs no
 * transaction, so each statement may be run again (one left invalid by an interrupted build is
 * dropped and built anew).
 */
export class OwnerScope1765900000000 implements MigrationInterface {
  name = 'OwnerScope1765900000000';
  transaction = false;

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE quarantine ADD COLUMN IF NOT EXISTS owner_id text`);
    await runner.query(
      `CREATE INDEX IF NOT EXISTS quarantine_owner ON quarantine (owner_id, id) WHERE owner_id IS NOT NULL`,
    );
    const [invalid] = await runner.query(
      `SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE c.relname = 'event_log_owner_position_idx' AND c.relnamespace = current_schema()::regnamespace
          AND NOT i.indisvalid`,
    );
    if (invalid !== undefined) await runner.query(`DROP INDEX CONCURRENTLY event_log_owner_position_idx`);
    await runner.query(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS event_log_owner_position_idx ON event_log (owner_id, position)`,
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX CONCURRENTLY IF EXISTS event_log_owner_position_idx`);
    await runner.query(`DROP INDEX IF EXISTS quarantine_owner`);
    await runner.query(`ALTER TABLE quarantine DROP COLUMN IF EXISTS owner_id`);
  }
}

import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `menu_sync_unprojected_menu_ids(subject_type, owner_id, ids)`: the ids of one menu type (of one
 * owner, or among `ids`, when given) in log entries past the menu projection's checkpoint: the
 * candidates an `as_of` read adds to the live table's ids (usually none). Called inside the
 * `as_of` statement, where the process used to ask for it first in two statements of its own.
 * The log's query is planned when called, with the checkpoint's values: compared with a
 * checkpoint the planner cannot see, it expected a third of the log, walked the subjects' index
 * instead of the transaction order and compiled the scan with JIT. The checkpoint's read keeps its
 * plan, as does the look for any entry past it (in the log's order, so never a scan of the log);
 * a rebuild's swap (schemas renamed) makes PostgreSQL plan them again, against the new schema.
 */
export class AsOfTail1764500000000 implements MigrationInterface {
  name = 'AsOfTail1764500000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE FUNCTION menu_sync_unprojected_menu_ids(subject_type text, owner_id text, ids text[]) RETURNS SETOF text
      LANGUAGE plpgsql STABLE PARALLEL RESTRICTED ROWS 1 AS $$
      DECLARE
        checkpoint record;
      BEGIN
        SELECT c.transaction_id, c.position INTO checkpoint FROM proj_menu.checkpoint c;
        -- Nothing past the checkpoint (the projector has caught up): no query to plan.
        IF NOT FOUND OR (
          SELECT e.position FROM event_log e
           WHERE e.transaction_id >= checkpoint.transaction_id
             AND (e.transaction_id, e.position) > (checkpoint.transaction_id, checkpoint.position)
           ORDER BY e.transaction_id, e.position LIMIT 1) IS NULL THEN
          RETURN;
        END IF;
        RETURN QUERY EXECUTE
          'SELECT DISTINCT e.subject_id FROM event_log e
            WHERE e.transaction_id >= $1 AND (e.transaction_id, e.position) > ($1, $2) AND e.subject_type = $3
              AND ($4::text IS NULL OR e.owner_id = $4) AND ($5::text[] IS NULL OR e.subject_id = ANY($5))'
          USING checkpoint.transaction_id, checkpoint.position, subject_type, owner_id, ids;
      END $$`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP FUNCTION menu_sync_unprojected_menu_ids(text, text, text[])`);
  }
}

import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `menu_sync_log_entries(positions)`: the log entries at `positions` (what an `as_of` read parses
 * the resource from), read by a bitmap heap scan that asks the kernel for its pages ahead
 * (`effective_io_concurrency`). A plain index scan, which the planner always prefers on a log whose
 * positions follow its pages, reads one page at a time: an `as_of` menu of 2,000 products reads
 * some 20,000 entries scattered over the log, and on a cold cache those reads were most of the
 * request; prefetched, they are several times faster. The settings hold inside the function only;
 * PostgreSQL's own configuration is left alone. PL/pgSQL keeps the query's plan for the session,
 * where a SQL function would be planned again at every call.
 */
export class LogEntriesPrefetched1764600000000 implements MigrationInterface {
  name = 'LogEntriesPrefetched1764600000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE FUNCTION menu_sync_log_entries(positions bigint[])
        RETURNS TABLE ("position" bigint, subject_type text, subject_id text, payload json)
      LANGUAGE plpgsql STABLE
      SET enable_indexscan = off
      SET effective_io_concurrency = 64 AS $$
      BEGIN
        RETURN QUERY SELECT e.position, e.subject_type, e.subject_id, e.payload FROM event_log e WHERE e.position = ANY (positions);
      END $$`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP FUNCTION menu_sync_log_entries(bigint[])`);
  }
}

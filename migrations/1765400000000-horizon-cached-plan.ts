import type { MigrationInterface, QueryRunner } from 'typeorm';

const BODY = `coalesce(
          (SELECT min(x) FROM pg_snapshot_xip(pg_current_snapshot()) AS x
            WHERE (x::text::numeric % 4294967296)::bigint NOT IN (
              SELECT backend_xid::text::bigint FROM pg_stat_activity
               WHERE backend_xid IS NOT NULL AND datname IS DISTINCT FROM current_database())),
          pg_snapshot_xmax(pg_current_snapshot()))`;

/**
 * event_log_horizon() in PL/pgSQL, with the same body. As an SQL function with a sub-select it is
 * never inlined, so PostgreSQL planned its query (a join through the pg_stat_activity view) at every
 * call: about 0.4 ms, paid by every projector page and every change-feed and sink read. PL/pgSQL
 * keeps the plan for the session. What it answers is unchanged.
 */
export class HorizonCachedPlan1765400000000 implements MigrationInterface {
  name = 'HorizonCachedPlan1765400000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE OR REPLACE FUNCTION event_log_horizon() RETURNS xid8 LANGUAGE plpgsql STABLE AS $$
        BEGIN
          RETURN ${BODY};
        END $$`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE OR REPLACE FUNCTION event_log_horizon() RETURNS xid8 LANGUAGE sql STABLE AS $$
        SELECT ${BODY}
      $$`);
  }
}

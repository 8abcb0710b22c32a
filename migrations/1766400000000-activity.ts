import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The activity history (docs/reference.md §11): counts per minute, kind and key, added to by every
 * process (`count = count + excluded.count`) and deleted after ACTIVITY_RETENTION. Changes are
 * counted where they are written: a statement trigger on `change_log` adds the rows of each
 * statement to the row of its own connection (key: the backend pid), so concurrent projector
 * transactions never wait on one another's counter row, and a rolled-back page counts nothing.
 */
export class Activity1766400000000 implements MigrationInterface {
  name = 'Activity1766400000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE activity_minutes (
        minute  timestamptz NOT NULL,
        kind    text NOT NULL,
        key     text NOT NULL,
        count   bigint NOT NULL,
        PRIMARY KEY (minute, kind, key)
      )`);
    await runner.query(`
      CREATE FUNCTION menu_sync_count_changes() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO activity_minutes (minute, kind, key, count)
        SELECT date_trunc('minute', now()), 'changes', pg_backend_pid()::text, count(*) FROM published
        HAVING count(*) > 0
        ON CONFLICT (minute, kind, key) DO UPDATE SET count = activity_minutes.count + excluded.count;
        RETURN NULL;
      END $$`);
    await runner.query(`
      CREATE TRIGGER change_log_activity AFTER INSERT ON change_log
        REFERENCING NEW TABLE AS published FOR EACH STATEMENT EXECUTE FUNCTION menu_sync_count_changes()`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TRIGGER IF EXISTS change_log_activity ON change_log`);
    await runner.query(`DROP FUNCTION IF EXISTS menu_sync_count_changes()`);
    await runner.query(`DROP TABLE IF EXISTS activity_minutes`);
  }
}

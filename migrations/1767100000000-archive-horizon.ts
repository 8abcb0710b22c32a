import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A NOTIFY on `menu_sync_archive_horizon` at every change of `event_log_archives` (one per
 * statement, sent at commit): each process keeps the archive horizon in memory (ArchiveHorizon)
 * and reads it again when told, so that a read above the horizon costs nothing more.
 */
export class ArchiveHorizon1767100000000 implements MigrationInterface {
  name = 'ArchiveHorizon1767100000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE FUNCTION menu_sync_archive_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_notify('menu_sync_archive_horizon', '');
          RETURN NULL;
        END $$`);
    await runner.query(`
      CREATE TRIGGER event_log_archives_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
        ON event_log_archives FOR EACH STATEMENT EXECUTE FUNCTION menu_sync_archive_changed()`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TRIGGER event_log_archives_changed ON event_log_archives`);
    await runner.query(`DROP FUNCTION menu_sync_archive_changed()`);
  }
}

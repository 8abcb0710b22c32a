import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The columns of a sink's settings: a statement that sets any of them tells the dispatchers. */
const SETTINGS = [
  'url',
  'url_sealed',
  'schema',
  'table_prefix',
  'stream',
  'subject_prefix',
  'types',
  'owner_ids',
  'batch_size',
  'timeout_ms',
  'secret',
  'previous_secret',
  'previous_secret_expires_at',
  'epoch',
  'updated_at',
];

/**
 * The change log read by owner in reader order: a consumer following a few stores (a sink per
 * store catching up, restarting, or after a failure) reads its stores' changes after its cursor
 * without walking every other store's. And a sink made, removed, or whose settings a statement sets
 * (the API, a replay, a new secret, an edit by hand) is told on `menu_sync_sinks` with its id, at
 * commit, so a dispatcher reads that sink alone instead of every sink twice a second; a delivery's
 * own writes (cursor, attempts, state) set none of them, and tell nobody.
 */
export class FanOut1765600000000 implements MigrationInterface {
  name = 'FanOut1765600000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE INDEX change_log_owner_reader_idx ON change_log (owner_id, transaction_id, seq)`);
    await runner.query(`
      CREATE FUNCTION menu_sync_sink_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_notify('menu_sync_sinks', CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END::text);
          RETURN NULL;
        END $$`);
    await runner.query(`
      CREATE TRIGGER sinks_changed AFTER INSERT OR DELETE OR UPDATE OF ${SETTINGS.join(', ')} ON sinks
        FOR EACH ROW EXECUTE FUNCTION menu_sync_sink_changed()`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TRIGGER sinks_changed ON sinks`);
    await runner.query(`DROP FUNCTION menu_sync_sink_changed()`);
    await runner.query(`DROP INDEX change_log_owner_reader_idx`);
  }
}

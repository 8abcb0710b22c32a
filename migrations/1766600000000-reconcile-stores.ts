import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Reconcile's schedule per store (docs/reference.md §13): when each store of each connection was
 * last reconciled, when it is due next (its slot in RECONCILE_INTERVAL, a priority, or a retry
 * after failures), and its lease bucket; and when a reconcile process was last alive, so that a
 * restart after a long stop reconciles every store first.
 */
export class ReconcileStores1766600000000 implements MigrationInterface {
  name = 'ReconcileStores1766600000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE reconcile_stores (
        connection_id         bigint NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
        store_id              text NOT NULL,
        bucket                integer NOT NULL,
        slot                  double precision NOT NULL CHECK (slot >= 0 AND slot < 1),
        owned                 boolean NOT NULL DEFAULT true,
        priority              text,
        next_due_at           timestamptz NOT NULL,
        last_reconciled_at    timestamptz,
        last_attempt_at       timestamptz,
        consecutive_failures  integer NOT NULL DEFAULT 0,
        last_error            text,
        created_at            timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (connection_id, store_id)
      )`);
    await runner.query(`CREATE INDEX reconcile_stores_due ON reconcile_stores (bucket, next_due_at)`);
    await runner.query(`
      CREATE TABLE reconcile_schedule (
        id        smallint PRIMARY KEY CHECK (id = 1),
        alive_at  timestamptz NOT NULL
      )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE IF EXISTS reconcile_schedule`);
    await runner.query(`DROP TABLE IF EXISTS reconcile_stores`);
  }
}

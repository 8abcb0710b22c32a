import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The audit log (docs/reference.md §12): one row per write of the API or the CLI that changed
 * something, who made it and from where. Pages run newest first down the primary key; the index on
 * `at` serves the retention job (AUDIT_RETENTION), the only thing that deletes rows.
 */
export class AuditLog1765800000000 implements MigrationInterface {
  name = 'AuditLog1765800000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE audit_log (
        id              bigserial PRIMARY KEY,
        at              timestamptz NOT NULL DEFAULT now(),
        actor_id        text NOT NULL,
        actor_name      text NOT NULL,
        action          text NOT NULL,
        target          text NOT NULL,
        remote_address  text,
        detail          jsonb
      )`);
    await runner.query(`CREATE INDEX audit_log_at ON audit_log (at)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE IF EXISTS audit_log`);
  }
}

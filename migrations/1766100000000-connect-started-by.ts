import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Who started each authorization request of the connect flow (the token's principal, never its
 * secret): the callback carries no token, so the audit log names the connection's maker from here.
 */
export class ConnectStartedBy1766100000000 implements MigrationInterface {
  name = 'ConnectStartedBy1766100000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(
      `ALTER TABLE oauth_authorizations ADD COLUMN started_by_id text, ADD COLUMN started_by_name text`,
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE oauth_authorizations DROP COLUMN started_by_id, DROP COLUMN started_by_name`);
  }
}

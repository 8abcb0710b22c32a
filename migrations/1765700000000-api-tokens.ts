import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * API tokens kept in the database (docs/reference.md §12): the secret itself is never stored, only
 * its SHA-256 `digest` (the secret is 256 random bits, so a digest is as good as a slow hash and
 * lets the guard look a token up by it). A token made, removed or changed (not its `last_used_at`)
 * is told on `menu_sync_api_tokens` at commit, so every process refreshes the tokens it accepts.
 */
export class ApiTokens1765700000000 implements MigrationInterface {
  name = 'ApiTokens1765700000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE api_tokens (
        id            uuid PRIMARY KEY,
        name          text NOT NULL,
        role          text NOT NULL CHECK (role IN ('read', 'admin')),
        owner_ids     text[] CHECK (owner_ids IS NULL OR (role = 'read' AND cardinality(owner_ids) > 0)),
        digest        bytea NOT NULL UNIQUE CHECK (octet_length(digest) = 32),
        expires_at    timestamptz,
        created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
        last_used_at  timestamptz
      )`);
    await runner.query(`CREATE INDEX api_tokens_page_idx ON api_tokens (created_at, id)`);
    await runner.query(`
      CREATE FUNCTION menu_sync_api_token_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_notify('menu_sync_api_tokens', CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END::text);
          RETURN NULL;
        END $$`);
    await runner.query(`
      CREATE TRIGGER api_tokens_changed AFTER INSERT OR DELETE OR UPDATE OF name, role, owner_ids, digest, expires_at
        ON api_tokens FOR EACH ROW EXECUTE FUNCTION menu_sync_api_token_changed()`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE api_tokens`);
    await runner.query(`DROP FUNCTION menu_sync_api_token_changed()`);
  }
}

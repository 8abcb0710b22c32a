import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Table sinks (docs/reference.md §12): `postgres` and `mysql` sinks write tables in the user's
 * database. Their `url` column holds the URL with the password masked, for display; the URL itself
 * exists only as AES-256-GCM ciphertext bound to the sink's id (`url_sealed`). `schema` (postgres)
 * and `table_prefix` (mysql) name where the tables are.
 */
export class TableSinks1764900000000 implements MigrationInterface {
  name = 'TableSinks1764900000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      ALTER TABLE sinks
        DROP CONSTRAINT sinks_kind_check,
        ADD CONSTRAINT sinks_kind_check CHECK (kind IN ('http', 'nats', 'postgres', 'mysql')),
        ADD COLUMN url_sealed bytea,
        ADD COLUMN schema text,
        ADD COLUMN table_prefix text,
        ADD CONSTRAINT sinks_table_target_check CHECK ((kind IN ('postgres', 'mysql')) = (url_sealed IS NOT NULL AND url IS NOT NULL)),
        ADD CONSTRAINT sinks_schema_check CHECK ((kind = 'postgres') = (schema IS NOT NULL)),
        ADD CONSTRAINT sinks_table_prefix_check CHECK ((kind = 'mysql') = (table_prefix IS NOT NULL))`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DELETE FROM sinks WHERE kind IN ('postgres', 'mysql')`);
    await runner.query(`
      ALTER TABLE sinks
        DROP CONSTRAINT sinks_table_prefix_check,
        DROP CONSTRAINT sinks_schema_check,
        DROP CONSTRAINT sinks_table_target_check,
        DROP COLUMN table_prefix,
        DROP COLUMN schema,
        DROP COLUMN url_sealed,
        DROP CONSTRAINT sinks_kind_check,
        ADD CONSTRAINT sinks_kind_check CHECK (kind IN ('http', 'nats'))`);
  }
}

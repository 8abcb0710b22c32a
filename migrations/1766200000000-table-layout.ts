import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The layout of a table sink's tables (docs/reference.md §12): `document` (the tables table sinks
 * have always written, so every existing one keeps it) or `relational`. Fixed at creation: a
 * target's tables are never rewritten into another layout.
 */
export class TableLayout1766200000000 implements MigrationInterface {
  name = 'TableLayout1766200000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE sinks ADD COLUMN layout text`);
    await runner.query(`UPDATE sinks SET layout = 'document' WHERE kind IN ('postgres', 'mysql')`);
    await runner.query(`
      ALTER TABLE sinks
        ADD CONSTRAINT sinks_layout_check CHECK (
          (kind IN ('postgres', 'mysql')) = (layout IS NOT NULL) AND (layout IS NULL OR layout IN ('document', 'relational')))`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE sinks DROP CONSTRAINT sinks_layout_check, DROP COLUMN layout`);
  }
}

import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Projection checkpoints (docs/reference.md §8): a projection's tables as they were at one position
 * of the log, each kept in a schema of its own (`<projection schema>__ckpt_<id>`, tables without
 * indexes), listed here. A replay or verify may start from one instead of the log's first entry.
 */
export class ProjectionCheckpoints1766900000000 implements MigrationInterface {
  name = 'ProjectionCheckpoints1766900000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE projection_checkpoints (
        id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        projection      text NOT NULL,
        schema_name     text NOT NULL UNIQUE,
        transaction_id  xid8 NOT NULL,
        position        bigint NOT NULL,
        rows            bigint NOT NULL,
        bytes           bigint NOT NULL,
        created_at      timestamptz NOT NULL DEFAULT now()
      )`);
    await runner.query(
      `CREATE INDEX projection_checkpoints_newest_idx ON projection_checkpoints (projection, transaction_id, position)`,
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    const rows: Array<{ schema_name: string }> = await runner.query(`SELECT schema_name FROM projection_checkpoints`);
    for (const { schema_name } of rows) await runner.query(`DROP SCHEMA IF EXISTS ${schema_name} CASCADE`);
    await runner.query(`DROP TABLE projection_checkpoints`);
  }
}

import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Pages of `GET /api/v1/sinks` (docs/reference.md §13) read from indexes, whatever the number of
 * sinks: one per order (by creation, and failing first: the state's rank, then the oldest failure),
 * and the searches by owner (`owner_ids @> ARRAY[…]`) and by id prefix (`id::text LIKE 'ab%'`).
 * The rank expression is the one SinkRepository orders by, character for character.
 */
export class SinkPages1765500000000 implements MigrationInterface {
  name = 'SinkPages1765500000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE INDEX sinks_created_idx ON sinks (created_at, id)`);
    await runner.query(`
      CREATE INDEX sinks_failing_idx ON sinks (
        (CASE state WHEN 'failing' THEN 0 WHEN 'retrying' THEN 1 WHEN 'disabled' THEN 2 ELSE 3 END),
        (coalesce(failing_since, 'infinity')), created_at, id)`);
    await runner.query(`CREATE INDEX sinks_owner_ids_idx ON sinks USING gin (owner_ids)`);
    await runner.query(`CREATE INDEX sinks_id_prefix_idx ON sinks ((id::text) text_pattern_ops)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX sinks_id_prefix_idx`);
    await runner.query(`DROP INDEX sinks_owner_ids_idx`);
    await runner.query(`DROP INDEX sinks_failing_idx`);
    await runner.query(`DROP INDEX sinks_created_idx`);
  }
}

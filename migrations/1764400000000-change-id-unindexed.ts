import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The change log's `change_id` loses its unique index. Nothing looks a change up by it (readers go
 * by (transaction_id, seq)), it is unique by construction (type, id, version position and the
 * writing transaction), and its index, filled in random order, slowed the projector's catch-up
 * (bench/change-log.js).
 */
export class ChangeIdUnindexed1764400000000 implements MigrationInterface {
  name = 'ChangeIdUnindexed1764400000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE change_log DROP CONSTRAINT change_log_change_id_key`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE change_log ADD CONSTRAINT change_log_change_id_key UNIQUE (change_id)`);
  }
}

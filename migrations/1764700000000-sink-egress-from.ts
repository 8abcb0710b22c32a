import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Where a sink starts (docs/reference.md §12): a sink started from `snapshot` first delivers the newest
 * change of every live resource it follows, as of a boundary position (the head when it started,
 * `(snapshot_xid, snapshot_seq)`), then the changes after the boundary. The positions of those
 * newest changes are chosen once, when it starts (`sink_snapshot_entries`), so that the sink pages
 * through a fixed set in (transaction id, seq) order with its ordinary cursor; they are removed
 * once its cursor reaches the boundary, and with the sink.
 */
export class SinkEgressFrom1764700000000 implements MigrationInterface {
  name = 'SinkEgressFrom1764700000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE sinks ADD COLUMN snapshot_xid xid8, ADD COLUMN snapshot_seq bigint`);
    await runner.query(`
      CREATE TABLE sink_snapshot_entries (
        sink_id        uuid NOT NULL REFERENCES sinks (id) ON DELETE CASCADE,
        transaction_id xid8 NOT NULL,
        seq            bigint NOT NULL,
        PRIMARY KEY (sink_id, transaction_id, seq)
      )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE sink_snapshot_entries`);
    await runner.query(`ALTER TABLE sinks DROP COLUMN snapshot_xid, DROP COLUMN snapshot_seq`);
  }
}

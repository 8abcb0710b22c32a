import { Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import type { LogCheckpoint } from '../event-log/log-entry.js';
import type { ProjectionDefinition } from '../projection/projection-definitions.js';
import { schemaTables } from './shadow-schema.repository.js';

/** A projection's tables as they were at `at`, kept in `schema` (see migration 1766900000000). */
export interface SavedCheckpoint {
  id: string;
  projection: string;
  schema: string;
  at: LogCheckpoint;
  rows: number;
  bytes: number;
  createdAt: Date;
}

interface CheckpointRow {
  id: string;
  projection: string;
  schema_name: string;
  transaction_id: string;
  position: string;
  rows: string;
  bytes: string;
  created_at: Date;
}

const COLUMNS = `id::text AS id, projection, schema_name, transaction_id::text AS transaction_id, position::text AS position,
  rows::text AS rows, bytes::text AS bytes, created_at`;

/** How many checkpoints of each projection `take` keeps (the newest). */
export const CHECKPOINTS_KEPT = 2;

/**
 * Saved checkpoints: `take` copies a projection's live tables (its checkpoint row, parked events,
 * owner versions, resources) in one REPEATABLE READ snapshot, so the copy is the model at exactly
 * its checkpoint's position, without holding up the live projector; `restoreInto` fills a rebuild's
 * empty schema from one, and the rebuild then applies only the log after it.
 */
@Injectable()
export class CheckpointRepository {
  /** Saves `projection` as it is now (the newest CHECKPOINTS_KEPT are kept); the same position twice is one checkpoint. */
  async take(runner: QueryRunner, projection: ProjectionDefinition): Promise<SavedCheckpoint> {
    await runner.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    try {
      const [at]: Array<{ transaction_id: string; position: string }> = await runner.query(
        `SELECT transaction_id::text AS transaction_id, position::text AS position FROM ${projection.schema}.checkpoint`,
      );
      const schema = `${projection.schema}__ckpt_${at.position}`;
      const [existing]: CheckpointRow[] = await runner.query(
        `SELECT ${COLUMNS} FROM projection_checkpoints WHERE schema_name = $1`,
        [schema],
      );
      if (existing !== undefined) {
        await runner.query('COMMIT');
        return saved(existing);
      }
      await runner.query(`CREATE SCHEMA ${schema}`);
      let rows = 0;
      for (const table of schemaTables(projection)) {
        await runner.query(`CREATE TABLE ${schema}.${table} AS SELECT * FROM ${projection.schema}.${table}`);
        const [{ n }] = await runner.query(`SELECT count(*)::bigint AS n FROM ${schema}.${table}`);
        rows += Number(n);
      }
      const [row]: CheckpointRow[] = await runner.query(
        `INSERT INTO projection_checkpoints (projection, schema_name, transaction_id, position, rows, bytes)
         SELECT $1, $2, $3::xid8, $4::bigint, $5::bigint, coalesce(sum(pg_total_relation_size(c.oid)), 0)
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $2 AND c.relkind = 'r'
         RETURNING ${COLUMNS}`,
        [projection.name, schema, at.transaction_id, at.position, rows],
      );
      await runner.query('COMMIT');
      await this.prune(runner, projection);
      return saved(row);
    } catch (error) {
      await runner.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  }

  /** The checkpoints of `projection`, newest first. */
  async list(runner: QueryRunner, projection: ProjectionDefinition): Promise<SavedCheckpoint[]> {
    const rows: CheckpointRow[] = await runner.query(
      `SELECT ${COLUMNS} FROM projection_checkpoints WHERE projection = $1 ORDER BY transaction_id DESC, position DESC`,
      [projection.name],
    );
    return rows.map(saved);
  }

  /** The newest checkpoint of `projection` at or below `atOrBelow` (any, when not given), or null. */
  async newest(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    atOrBelow?: LogCheckpoint,
  ): Promise<SavedCheckpoint | null> {
    const [row]: CheckpointRow[] = await runner.query(
      `SELECT ${COLUMNS} FROM projection_checkpoints
        WHERE projection = $1 AND ($2::xid8 IS NULL OR (transaction_id, position) <= ($2::xid8, $3::bigint))
        ORDER BY transaction_id DESC, position DESC LIMIT 1`,
      [projection.name, atOrBelow?.transactionId ?? null, atOrBelow?.position ?? null],
    );
    return row === undefined ? null : saved(row);
  }

  /**
   * Fills `schema` (an empty copy of the live schema, its checkpoint row at the start) with
   * `checkpoint`: by column name, less the generated ones, so a column added since is left to its default.
   */
  async restoreInto(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    checkpoint: SavedCheckpoint,
    schema: string,
  ): Promise<void> {
    for (const table of schemaTables(projection)) {
      const columns: Array<{ name: string }> = await runner.query(
        `SELECT quote_ident(t.column_name) AS name
           FROM information_schema.columns t
           JOIN information_schema.columns s
             ON s.table_schema = $3 AND s.table_name = t.table_name AND s.column_name = t.column_name
          WHERE t.table_schema = $1 AND t.table_name = $2 AND t.is_generated = 'NEVER'
          ORDER BY t.ordinal_position`,
        [schema, table, checkpoint.schema],
      );
      const list = columns.map(({ name }) => name).join(', ');
      await runner.query(`DELETE FROM ${schema}.${table}`);
      await runner.query(`INSERT INTO ${schema}.${table} (${list}) SELECT ${list} FROM ${checkpoint.schema}.${table}`);
    }
  }

  /** Drops the checkpoints of `projection` older than the newest CHECKPOINTS_KEPT. */
  private async prune(runner: QueryRunner, projection: ProjectionDefinition): Promise<void> {
    const old = (await this.list(runner, projection)).slice(CHECKPOINTS_KEPT);
    for (const checkpoint of old) {
      await runner.query(`DROP SCHEMA IF EXISTS ${checkpoint.schema} CASCADE`);
      await runner.query(`DELETE FROM projection_checkpoints WHERE id = $1`, [checkpoint.id]);
    }
  }
}

function saved(row: CheckpointRow): SavedCheckpoint {
  return {
    id: row.id,
    projection: row.projection,
    schema: row.schema_name,
    at: { transactionId: row.transaction_id, position: row.position },
    rows: Number(row.rows),
    bytes: Number(row.bytes),
    createdAt: row.created_at,
  };
}

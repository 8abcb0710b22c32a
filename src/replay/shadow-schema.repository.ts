import { Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { advisoryLocks, lockQuery } from '../database/advisory-locks.js';
import type { LogCheckpoint } from '../event-log/log-entry.js';
import type { ProjectionDefinition } from '../projection/projection-definitions.js';
import { changeRowSql, notifiedSql, VISIBLE_COLUMNS } from '../projection/published-changes.js';

/** The columns the fold decides: what verify compares. */
const COMPARED = [
  'owner_id',
  'attributes',
  'relationships',
  'deleted',
  'occurred_at',
  'event_seq',
  'event_id',
  'position',
  'data_occurred_at',
  'data_event_seq',
  'data_event_id',
];

export interface RowDifference {
  id: string;
  live: boolean;
  rebuilt: boolean;
  fields: string[];
}

/**
 * The tables of a projection's schema: its checkpoint, its parked events, the menu's per-owner
 * versions (its ETags, rebuilt with the rows: a swap carries them, see carryOwnerVersions) and the
 * resources.
 */
export function schemaTables(projection: ProjectionDefinition): string[] {
  const extra = projection.name === 'menu' ? ['owner_versions'] : [];
  return ['checkpoint', 'parked_events', ...extra, ...projection.tables.map((t) => t.table)];
}

/** The SQL of a rebuild: its lock, the shadow copy of a projection's schema, the swap, the comparison. */
@Injectable()
export class ShadowSchemaRepository {
  async tryLock(runner: QueryRunner, projection: ProjectionDefinition): Promise<boolean> {
    const [{ result }] = await runner.query(
      ...lockQuery('pg_try_advisory_lock', advisoryLocks.inSpace('rebuild', projection.lockKey)),
    );
    return result;
  }

  async unlock(runner: QueryRunner): Promise<void> {
    await runner.query('SELECT pg_advisory_unlock_all()');
  }

  /** An empty copy of the live schema (columns, constraints, indexes, storage options). */
  async create(runner: QueryRunner, projection: ProjectionDefinition, schema: string): Promise<void> {
    await this.drop(runner, schema);
    await runner.query(`CREATE SCHEMA ${schema}`);
    for (const table of schemaTables(projection)) {
      // LIKE copies columns, constraints and indexes but not storage options (fillfactor).
      const [{ options }] = await runner.query(
        `SELECT array_to_string(reloptions, ', ') AS options FROM pg_class WHERE oid = $1::regclass`,
        [`${projection.schema}.${table}`],
      );
      await runner.query(
        `CREATE TABLE ${schema}.${table} (LIKE ${projection.schema}.${table} INCLUDING ALL)` +
          (options ? ` WITH (${options})` : ''),
      );
    }
    await runner.query(`INSERT INTO ${schema}.checkpoint DEFAULT VALUES`);
  }

  async drop(runner: QueryRunner, schema: string): Promise<void> {
    await runner.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  }

  /** Renames the shadow into the live schema's place (in the caller's transaction); the old one becomes `…__old`. */
  async swap(runner: QueryRunner, projection: ProjectionDefinition, shadow: string): Promise<void> {
    // Left by an earlier replay cut off between its swap and its clean-up.
    await this.drop(runner, `${projection.schema}__old`);
    await runner.query(`ALTER SCHEMA ${projection.schema} RENAME TO ${projection.schema}__old`);
    await runner.query(`ALTER SCHEMA ${shadow} RENAME TO ${projection.schema}`);
  }

  /**
   * In the swap's transaction, before the rename: one change for each resource of `types` whose
   * API-visible state differs between the live schema and `shadow` — a resource only the live model
   * has is published deleted (its last state, `deleted: true`). Returns how many.
   */
  async publishDifferences(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    shadow: string,
    types: string[],
  ): Promise<number> {
    const tables = projection.tables.filter(({ type }) => types.includes(type));
    if (tables.length === 0) return 0;
    const visible = (alias: string) => `(${VISIBLE_COLUMNS.map((column) => `${alias}.${column}`).join(', ')})`;
    const ctes = tables.map(
      ({ type, table }) => `${table}_published AS (
      INSERT INTO change_log (change_id, type, id, owner_id, op, resource)
      SELECT d.change_id, d.type, d.id, d.owner_id, d.op, d.resource FROM (
        SELECT n.position, n.id, ${changeRowSql(type, 'n')}
          FROM ${shadow}.${table} n LEFT JOIN ${projection.schema}.${table} o USING (id)
         WHERE o.id IS NULL OR ${visible('o')} IS DISTINCT FROM ${visible('n')}
        UNION ALL
        SELECT o.position, o.id, '${type}:' || o.id || ':gone:' || pg_current_xact_id()::text, '${type}', o.id, o.owner_id, 'delete',
               menu_sync_resource('${type}', o.id, o.owner_id, o.attributes, o.relationships, o.event_id, o.occurred_at, o.position, true)
          FROM ${projection.schema}.${table} o
         WHERE NOT EXISTS (SELECT 1 FROM ${shadow}.${table} n WHERE n.id = o.id)
        ORDER BY 1, 2) AS d (position, sort_id, change_id, type, id, owner_id, op, resource)
      RETURNING 1)`,
    );
    const [row] = await runner.query(`WITH ${ctes.join(',\n')},
      ${notifiedSql(tables.map(({ table }) => table))}
      SELECT ${tables.map(({ table }) => `(SELECT count(*) FROM ${table}_published)`).join(' + ')} AS published,
             (SELECT count(*) FROM notified) AS notified`);
    return Number(row.published);
  }

  /**
   * In the swap's transaction, for the menu: the rebuilt schema keeps the live owner versions (the
   * `/menu` ETags), and only owners with a resource whose API-visible state differs (or that only
   * one side has) get a new one, so a replay that changes nothing changes no ETag.
   */
  async carryOwnerVersions(runner: QueryRunner, projection: ProjectionDefinition, shadow: string): Promise<void> {
    if (projection.name !== 'menu') return;
    const visible = (alias: string) => `(${VISIBLE_COLUMNS.map((column) => `${alias}.${column}`).join(', ')})`;
    const changed = projection.tables.map(
      ({ table }) => `
      SELECT unnest(ARRAY[n.owner_id, o.owner_id]) AS owner_id
        FROM ${shadow}.${table} n FULL JOIN ${projection.schema}.${table} o USING (id)
       WHERE n.id IS NULL OR o.id IS NULL OR ${visible('o')} IS DISTINCT FROM ${visible('n')}`,
    );
    await runner.query(`DELETE FROM ${shadow}.owner_versions`);
    await runner.query(`
      WITH changed AS MATERIALIZED (SELECT DISTINCT owner_id FROM (${changed.join(' UNION ALL ')}) AS c WHERE owner_id IS NOT NULL)
      INSERT INTO ${shadow}.owner_versions (owner_id, version)
      SELECT owner_id, version FROM ${projection.schema}.owner_versions WHERE owner_id NOT IN (SELECT owner_id FROM changed)
      UNION ALL
      SELECT owner_id, nextval('menu_owner_version_seq') FROM changed`);
  }

  /** After the swap has committed: the retired live schema goes. */
  async dropRetired(runner: QueryRunner, projection: ProjectionDefinition): Promise<void> {
    await runner.query(`DROP SCHEMA ${projection.schema}__old CASCADE`);
  }

  async countLogEntries(runner: QueryRunner): Promise<number> {
    const [{ total }] = await runner.query(`SELECT count(*)::int AS total FROM event_log`);
    return total;
  }

  /** The last entry a gap-safe reader may read now. */
  async horizon(runner: QueryRunner): Promise<LogCheckpoint> {
    const rows: Array<{ transaction_id: string; position: string }> = await runner.query(
      `SELECT e.transaction_id::text AS transaction_id, e.position::text AS position FROM event_log e
        WHERE e.transaction_id < (SELECT event_log_horizon())
        ORDER BY e.transaction_id DESC, e.position DESC LIMIT 1`,
    );
    return rows.length === 0
      ? { transactionId: '0', position: '0' }
      : { transactionId: rows[0].transaction_id, position: rows[0].position };
  }

  /** Rows of a table that differ between the live schema and `scratch`, in id order. */
  async differences(
    runner: QueryRunner,
    projection: ProjectionDefinition,
    table: string,
    scratch: string,
  ): Promise<RowDifference[]> {
    return runner.query(
      `SELECT coalesce(l.id, s.id) AS id, l.id IS NOT NULL AS live, s.id IS NOT NULL AS rebuilt,
              array_remove(ARRAY[${COMPARED.map((c) => `CASE WHEN l.${c} IS DISTINCT FROM s.${c} THEN '${c}' END`).join(', ')}], NULL) AS fields
         FROM ${projection.schema}.${table} l FULL JOIN ${scratch}.${table} s ON s.id = l.id
        WHERE l.id IS NULL OR s.id IS NULL
           OR (${COMPARED.map((c) => `l.${c}`).join(', ')}) IS DISTINCT FROM (${COMPARED.map((c) => `s.${c}`).join(', ')})
        ORDER BY coalesce(l.sort_key, s.sort_key)`,
    );
  }
}

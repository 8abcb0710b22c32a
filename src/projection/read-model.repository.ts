import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { CHANGE_COLUMNS, isSubject, ORDERS_PROJECTION } from './projection-definitions.js';
import { ResourceTable } from './resource-tables.js';

export interface ResourceRow {
  id: string;
  sort_key: string;
  owner_id: string | null;
  attributes: Record<string, unknown>;
  relationships: Record<string, unknown>;
  deleted: boolean;
  occurred_at: Date;
  event_id: string;
  position: string;
}

export interface RowFilter {
  ownerId?: string;
  ids?: string[];
  updatedSince?: Date;
  includeDeleted?: boolean;
  afterSortKey?: string;
  limit?: number;
  /** Fold the log up to this instant instead of reading the live tables. */
  asOf?: Date;
}

/** As the live read model, `as_of` leaves out events the projector parked (CONTRACT §4). */
const notParked = (table: ResourceTable) =>
  `NOT EXISTS (SELECT 1 FROM ${table.schema}.parked_events parked WHERE parked.position = e.position)`;

const NEWEST_FIRST = `occurred_at DESC, coalesce(event_seq, '-Infinity') DESC, event_id COLLATE "C" DESC`;

/**
 * Reads resources from the read model, or — with `asOf` — from the log folded up to that instant
 * with the same version rule, so both answer in one shape.
 */
@Injectable()
export class ReadModelRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Runs `work` in one read-only REPEATABLE READ transaction: every read through its manager sees
   * one snapshot (a page and the change-log cursor consistent with it, say).
   */
  inSnapshot<T>(work: (db: EntityManager) => Promise<T>): Promise<T> {
    return this.dataSource.transaction('REPEATABLE READ', async (db) => {
      await db.query('SET TRANSACTION READ ONLY');
      return work(db);
    });
  }

  async find(table: ResourceTable, filter: RowFilter, db?: EntityManager): Promise<ResourceRow[]> {
    const params: unknown[] = [];
    const param = (value: unknown) => `$${params.push(value)}`;
    const source = filter.asOf ? this.asOfSource(table, filter, param) : `${table.schema}.${table.name}`;
    const where: string[] = [];
    if (filter.ownerId !== undefined) where.push(`owner_id = ${param(filter.ownerId)}`);
    if (filter.ids !== undefined) where.push(`id = ANY(${param(filter.ids)}::text[])`);
    if (!filter.includeDeleted) where.push('NOT deleted');
    if (filter.updatedSince !== undefined) where.push(`occurred_at >= ${param(filter.updatedSince)}`);
    if (filter.afterSortKey !== undefined) where.push(`sort_key > ${param(filter.afterSortKey)}`);
    const limit = filter.limit === undefined ? '' : `LIMIT ${param(filter.limit)}`;
    return (db ?? this.dataSource).query(
      `SELECT id, sort_key, owner_id, attributes, relationships, deleted, occurred_at, event_id, position::text AS position
         FROM ${source} ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY sort_key ${limit}`,
      params,
    );
  }

  private asOfSource(table: ResourceTable, filter: RowFilter, param: (value: unknown) => string): string {
    return table.schema === 'proj_menu' ? this.menuAsOf(table, filter, param) : this.ordersAsOf(table, filter, param);
  }

  /**
   * A menu resource as of an instant: per id, the newest event up to then decides version and
   * `deleted`; the newest create/update decides attributes — only its payload is parsed, and a
   * payload that jsonb refuses reads as no attributes rather than failing the request.
   */
  private menuAsOf(table: ResourceTable, filter: RowFilter, param: (value: unknown) => string): string {
    const scope = [`e.subject_type = ${param(table.type)}`, `e.occurred_at <= ${param(filter.asOf)}`,
      `e.event_type IN (${['created', 'updated', 'destroyed'].map((kind) => `'${table.type}.${kind}'`).join(', ')})`,
      notParked(table)];
    if (filter.ids !== undefined) scope.push(`e.subject_id = ANY(${param(filter.ids)}::text[])`);
    return `(
      WITH scoped AS (SELECT e.position, e.subject_id, e.owner_id, e.occurred_at, e.event_seq, e.event_id, e.event_type
                        FROM event_log e WHERE ${scope.join(' AND ')}),
      newest AS (SELECT DISTINCT ON (subject_id) * FROM scoped ORDER BY subject_id, ${NEWEST_FIRST}),
      newest_data AS (SELECT DISTINCT ON (subject_id) * FROM scoped WHERE event_type NOT LIKE '%.destroyed'
                       ORDER BY subject_id, ${NEWEST_FIRST}),
      data AS (SELECT d.subject_id, subject.resource
                 FROM newest_data d JOIN event_log e ON e.position = d.position
                 CROSS JOIN LATERAL (SELECT resource FROM jsonb_array_elements(
                                        CASE WHEN jsonb_typeof(menu_sync_jsonb(e.payload) -> 'included') = 'array'
                                          THEN menu_sync_jsonb(e.payload) -> 'included' ELSE '[]' END) AS resource
                                      WHERE ${isSubject('resource')}
                                      LIMIT 1) AS subject)
      SELECT n.subject_id AS id, menu_sync_sort_key(n.subject_id) AS sort_key, n.owner_id,
             coalesce(d.resource -> 'attributes', '{}') AS attributes, coalesce(d.resource -> 'relationships', '{}') AS relationships,
             n.event_type LIKE '%.destroyed' AS deleted, n.occurred_at, n.event_id, n.position
        FROM newest n LEFT JOIN data d USING (subject_id)) AS folded`;
  }

  /** Order resources as of an instant: folded from the order events' `included`. */
  private ordersAsOf(table: ResourceTable, filter: RowFilter, param: (value: unknown) => string): string {
    const changes = ORDERS_PROJECTION.changes(`e.occurred_at <= ${param(filter.asOf)} AND ${notParked(table)}`,
      'menu_sync_jsonb(e.payload)');
    const ofType = `type = ${param(table.type)}`;
    return `(
      WITH changes (${CHANGE_COLUMNS}) AS (${changes})
      SELECT DISTINCT ON (id) id, menu_sync_sort_key(id) AS sort_key, owner_id, attributes, relationships, deleted,
             occurred_at, event_id, position
        FROM changes WHERE ${ofType} ORDER BY id, ${NEWEST_FIRST}) AS folded`;
  }
}

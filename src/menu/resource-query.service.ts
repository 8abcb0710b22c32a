import { createHash } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { encodeChangeCursor } from '../changes/change-cursor.js';
import { ChangeLogRepository } from '../changes/change-log.repository.js';
import { BadRequestError, NotFoundError } from '../common/app-error.js';
import { ReadModelRepository, ResourceRow } from '../projection/read-model.repository.js';
import { RESOURCE_TABLES, ResourceTable, tableByName } from '../projection/resource-tables.js';
import { ListQuery } from './resource-query.dto.js';

export interface ApiResource {
  type: string;
  id: string;
  owner_id: string | null;
  attributes: Record<string, unknown>;
  relationships: Record<string, unknown>;
  version: { event_id: string; occurred_at: string; position: number };
  deleted: boolean;
  [expansion: string]: unknown;
}

/** Lists, items, expansions and the menu document (CONTRACT §5), live or `as_of`. */
@Injectable()
export class ResourceQueryService {
  constructor(private readonly rows: ReadModelRepository, private readonly changes: ChangeLogRepository) {}

  /**
   * A page, with the change-log cursor read in the same snapshot (`changes_cursor`, CONTRACT §11):
   * following the feed from it misses nothing the page lacks and repeats nothing it has. None with `as_of`.
   */
  async list(name: string, query: ListQuery) {
    const table = this.table(name);
    if (query.as_of !== undefined) return { ...(await this.listIn(undefined, table, query)), changes_cursor: null };
    return this.rows.inSnapshot(async (db) => ({
      ...(await this.listIn(db, table, query)),
      changes_cursor: encodeChangeCursor(await this.changes.positionInSnapshot(db)),
    }));
  }

  private async listIn(db: EntityManager | undefined, table: ResourceTable, query: ListQuery) {
    const found = await this.rows.find(table, {
      ownerId: query.owner_id,
      updatedSince: query.updated_since,
      includeDeleted: query.include_deleted,
      afterSortKey: query.cursor === undefined ? undefined : decodeCursor(query.cursor),
      limit: query.limit,
      asOf: query.as_of,
    }, db);
    const last = found.at(-1);
    return {
      data: found.map((row) => toResource(table, row)),
      next_cursor: found.length === query.limit && last ? Buffer.from(last.sort_key).toString('base64url') : null,
    };
  }

  /** The resource, deleted or not; 404 when never seen. */
  async get(name: string, id: string, asOf?: Date): Promise<ApiResource> {
    const table = this.table(name);
    const [row] = await this.rows.find(table, { ids: [id], includeDeleted: true, asOf });
    if (!row) throw new NotFoundError(`No ${table.type} ${id} is known.`);
    return toResource(table, row);
  }

  async product(id: string, expand: boolean, asOf?: Date): Promise<ApiResource> {
    const product = await this.get('products', id, asOf);
    if (!expand || product.deleted) return product;
    const [expanded] = await this.expandTraits([product], asOf);
    return expanded;
  }

  async order(id: string, expand: boolean, asOf?: Date): Promise<ApiResource> {
    const order = await this.get('orders', id, asOf);
    if (!expand) return order;
    const products = await this.children(RESOURCE_TABLES.order_product, linkIds(order, 'order_products'), asOf);
    const options = await this.children(RESOURCE_TABLES.order_product_trait_option,
      products.flatMap((product) => linkIds(product, 'order_product_trait_options')), asOf);
    return {
      ...order,
      order_products: pick(products, linkIds(order, 'order_products')).map((product) => ({
        ...product,
        order_product_trait_options: pick(options, linkIds(product, 'order_product_trait_options')),
      })),
    };
  }

  /**
   * Every live collection and product of an owner, products expanded; the ETag is the content's hash
   * (the cursor left out: it moves with other owners' changes). Read in one snapshot with its
   * `changes_cursor` (none with `as_of`).
   */
  async menu(ownerId: string, asOf?: Date): Promise<{
    body: { collections: ApiResource[]; products: ApiResource[]; changes_cursor: string | null }; etag: string;
  }> {
    if (asOf !== undefined) return this.menuIn(undefined, ownerId, null, asOf);
    return this.rows.inSnapshot(async (db) =>
      this.menuIn(db, ownerId, encodeChangeCursor(await this.changes.positionInSnapshot(db))));
  }

  private async menuIn(db: EntityManager | undefined, ownerId: string, cursor: string | null, asOf?: Date) {
    const [collections, products] = await Promise.all([
      this.rows.find(RESOURCE_TABLES.collection, { ownerId, asOf }, db),
      this.rows.find(RESOURCE_TABLES.product, { ownerId, asOf }, db),
    ]);
    const content = {
      collections: collections.map((row) => toResource(RESOURCE_TABLES.collection, row)),
      products: await this.expandTraits(products.map((row) => toResource(RESOURCE_TABLES.product, row)), asOf, db),
    };
    const etag = `"${createHash('sha256').update(JSON.stringify(content)).digest('base64url')}"`;
    return { body: { ...content, changes_cursor: cursor }, etag };
  }

  /** Follows product → traits → trait options, leaving out unknown and deleted ones, in relationship order. */
  private async expandTraits(products: ApiResource[], asOf?: Date, db?: EntityManager): Promise<ApiResource[]> {
    const traits = await this.children(RESOURCE_TABLES.trait, products.flatMap((p) => linkIds(p, 'traits')), asOf, db);
    const options = await this.children(RESOURCE_TABLES.trait_option, traits.flatMap((t) => linkIds(t, 'trait_options')), asOf, db);
    return products.map((product) => ({
      ...product,
      traits: pick(traits, linkIds(product, 'traits')).map((trait) => ({
        ...trait,
        trait_options: pick(options, linkIds(trait, 'trait_options')),
      })),
    }));
  }

  private async children(table: ResourceTable, ids: string[], asOf?: Date, db?: EntityManager): Promise<ApiResource[]> {
    const unique = [...new Set(ids)];
    if (unique.length === 0) return [];
    const found: ApiResource[] = [];
    for (let i = 0; i < unique.length; i += 1000) {
      const rows = await this.rows.find(table, { ids: unique.slice(i, i + 1000), asOf }, db);
      found.push(...rows.map((row) => toResource(table, row)));
    }
    return found;
  }

  private table(name: string): ResourceTable {
    const table = tableByName(name);
    if (!table) throw new NotFoundError(`No resource collection ${name}.`);
    return table;
  }
}

function toResource(table: ResourceTable, row: ResourceRow): ApiResource {
  return {
    type: table.type,
    id: row.id,
    owner_id: row.owner_id,
    attributes: row.attributes,
    relationships: row.relationships,
    version: { event_id: row.event_id, occurred_at: new Date(row.occurred_at).toISOString(), position: Number(row.position) },
    deleted: row.deleted,
  };
}

/** The ids of a to-many relationship, in order. */
function linkIds(resource: ApiResource, relationship: string): string[] {
  const data = (resource.relationships[relationship] as { data?: unknown } | undefined)?.data;
  if (!Array.isArray(data)) return [];
  return data.flatMap((item) => {
    const id = (item as { id?: unknown } | null)?.id;
    return typeof id === 'string' || typeof id === 'number' ? [String(id)] : [];
  });
}

function pick(resources: ApiResource[], ids: string[]): ApiResource[] {
  const byId = new Map(resources.map((resource) => [resource.id, resource]));
  return ids.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
}

function decodeCursor(cursor: string): string {
  const key = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[01]/.test(key)) throw new BadRequestError('cursor must be a next_cursor value', 'cursor');
  return key;
}

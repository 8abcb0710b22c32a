import { Inject, Injectable } from '@nestjs/common';
import { encodeChangeCursor } from '../changes/change-cursor.js';
import { BadRequestError, NotFoundError } from '../common/app-error.js';
import { inChunks } from '../common/in-chunks.js';
import type { OwnerScope } from '../common/owner-scope.js';
import { replicaOf } from '../database/read-replica.js';
import { ArchiveHorizonService } from '../event-log/archive-horizon.service.js';
import { onSide, type ReadSide } from '../database/read-router.service.js';
import type { ApiResource } from '../projection/api-resource.js';
import { RESOURCE_TABLES, ResourceTable, tableByName } from '../projection/resource-tables.js';
import { ReadModelRepository, ResourceRow } from './read-model.repository.js';
import { ListQuery } from './resource-query.dto.js';

export type { ApiResource };

/**
 * Lists, items and expansions (docs/reference.md §5), live or `as_of`, each read on the side it is
 * given (the primary by default; ReadRouter decides), and within a token's owner scope (§12): a
 * resource of another owner is not found, as one never seen.
 */
@Injectable()
export class ResourceQueryService {
  constructor(
    private readonly primaryRows: ReadModelRepository,
    @Inject(replicaOf(ReadModelRepository)) private readonly replicaRows: ReadModelRepository | null = null,
    /** Nest always gives it; a test building the service by hand may leave it out (no horizon). */
    @Inject(ArchiveHorizonService) private readonly horizon: ArchiveHorizonService | null = null,
  ) {}

  /**
   * A page as JSON text, with the change-log cursor read in the same snapshot (`changes_cursor`,
   * docs/reference.md §11): following the feed from it misses nothing the page lacks and repeats
   * nothing it has; none with `as_of`. Menu resources (live or `as_of`) and live order resources are each the
   * text PostgreSQL builds, written out without being parsed and serialised again (that work was
   * most of a page's cost in the process); orders `as_of` are folded and serialised.
   */
  async list(name: string, query: ListQuery, side: ReadSide = 'primary', scope: OwnerScope = null): Promise<Page> {
    const table = this.table(name);
    this.horizon?.checkAsOf(query.as_of);
    const filter = { ...listFilter(query), ownerIds: scope ?? undefined, archiveBase: this.archived };
    const read = this.rows(side);
    if (query.as_of === undefined) {
      const { rows, position } = await read.findDocsWithChangePosition(table, filter);
      return page(
        rows.map((row) => row.doc),
        rows,
        query,
        encodeChangeCursor(position),
      );
    }
    if (table.schema === 'proj_menu') {
      const rows = await read.findDocsAsOf(table, { ...filter, asOf: query.as_of });
      return page(
        rows.map((row) => row.doc),
        rows,
        query,
        null,
      );
    }
    const rows = await read.find(table, { ...filter, asOf: query.as_of });
    return page(
      rows.map((row) => JSON.stringify(toResource(table, row))),
      rows,
      query,
      null,
    );
  }

  /**
   * `get` as JSON text, with whether it is deleted (410): the text PostgreSQL builds, but for
   * orders `as_of`, serialised from `get`.
   */
  async getText(
    name: string,
    id: string,
    asOf?: Date,
    side: ReadSide = 'primary',
    scope: OwnerScope = null,
  ): Promise<{ deleted: boolean; body: string }> {
    const table = this.table(name);
    this.horizon?.checkAsOf(asOf);
    if (asOf !== undefined && table.schema !== 'proj_menu') {
      const resource = await this.get(name, id, asOf, side, scope);
      return { deleted: resource.deleted, body: JSON.stringify(resource) };
    }
    const ownerIds = scope ?? undefined;
    const [found] =
      asOf === undefined
        ? [await this.rows(side).findDoc(table, id, ownerIds)]
        : await this.rows(side).findDocsAsOf(table, {
            ids: [id],
            includeDeleted: true,
            asOf,
            ownerIds,
            archiveBase: this.archived,
          });
    if (found === undefined) throw new NotFoundError(`No ${table.type} ${id} is known.`);
    return { deleted: found.deleted, body: found.doc };
  }

  /** The resource, deleted or not; 404 when never seen (or outside `scope`). */
  async get(
    name: string,
    id: string,
    asOf?: Date,
    side: ReadSide = 'primary',
    scope: OwnerScope = null,
  ): Promise<ApiResource> {
    const table = this.table(name);
    this.horizon?.checkAsOf(asOf);
    const [row] = await this.rows(side).find(table, {
      ids: [id],
      includeDeleted: true,
      asOf,
      ownerIds: scope ?? undefined,
      archiveBase: this.archived,
    });
    if (!row) throw new NotFoundError(`No ${table.type} ${id} is known.`);
    return toResource(table, row);
  }

  async product(
    id: string,
    expand: boolean,
    asOf?: Date,
    side: ReadSide = 'primary',
    scope: OwnerScope = null,
  ): Promise<ApiResource> {
    const product = await this.get('products', id, asOf, side, scope);
    if (!expand || product.deleted) return product;
    const [expanded] = await this.folder(asOf, side, scope).expand([product]);
    return expanded;
  }

  async order(
    id: string,
    expand: boolean,
    asOf?: Date,
    side: ReadSide = 'primary',
    scope: OwnerScope = null,
  ): Promise<ApiResource> {
    const order = await this.get('orders', id, asOf, side, scope);
    if (!expand) return order;
    const children = (table: ResourceTable, ids: string[]) => this.children(table, ids, asOf, side, scope);
    const products = await children(RESOURCE_TABLES.order_product, linkIds(order, 'order_products'));
    const options = await children(
      RESOURCE_TABLES.order_product_trait_option,
      products.flatMap((product) => linkIds(product, 'order_product_trait_options')),
    );
    const optionsById = byId(options);
    return {
      ...order,
      order_products: pick(byId(products), linkIds(order, 'order_products')).map((product) => ({
        ...product,
        order_product_trait_options: pick(optionsById, linkIds(product, 'order_product_trait_options')),
      })),
    };
  }

  /** Traits and trait options folded (live or `as_of`) once each, for expanding products. */
  private folder(asOf: Date | undefined, side: ReadSide, scope: OwnerScope): TraitExpansion {
    return new TraitExpansion((table, ids) => this.children(table, ids, asOf, side, scope));
  }

  /** The resources of `ids` (unknown and deleted ones, and those outside `scope`, left out). */
  private async children(
    table: ResourceTable,
    ids: string[],
    asOf: Date | undefined,
    side: ReadSide,
    scope: OwnerScope,
  ): Promise<ApiResource[]> {
    const read = this.rows(side);
    const ownerIds = scope ?? undefined;
    const rows = await inChunks(
      ids,
      (chunk) => read.find(table, { ids: chunk, asOf, ownerIds, archiveBase: this.archived }),
      CHILDREN_CHUNKS,
    );
    return rows.map((row) => toResource(table, row));
  }

  /** Whether `as_of` folds the archive base too: only once part of the log is archived. */
  private get archived(): boolean {
    return this.horizon?.archived ?? false;
  }

  private rows(side: ReadSide): ReadModelRepository {
    return onSide(side, this.primaryRows, this.replicaRows);
  }

  private table(name: string): ResourceTable {
    const table = tableByName(name);
    if (!table) throw new NotFoundError(`No resource collection ${name}.`);
    return table;
  }
}

function listFilter(query: ListQuery) {
  return {
    ownerId: query.owner_id,
    updatedSince: query.updated_since,
    includeDeleted: query.include_deleted,
    afterSortKey: query.cursor === undefined ? undefined : decodeCursor(query.cursor),
    limit: query.limit,
  };
}

/** A list page as JSON text, and its `changes_cursor` (none with `as_of`). */
export interface Page {
  body: string;
  changes_cursor: string | null;
}

/** `list`'s answer: the resources' JSON texts, and the page's rows for its `next_cursor`. */
function page(docs: string[], rows: Array<{ sort_key: string }>, query: ListQuery, changesCursor: string | null): Page {
  const last = rows.at(-1);
  const nextCursor = rows.length === query.limit && last ? Buffer.from(last.sort_key).toString('base64url') : null;
  return {
    body: `{"data":[${docs.join(',')}],"next_cursor":${JSON.stringify(nextCursor)},"changes_cursor":${JSON.stringify(changesCursor)}}`,
    changes_cursor: changesCursor,
  };
}

function toResource(table: ResourceTable, row: ResourceRow): ApiResource {
  return {
    type: table.type,
    id: row.id,
    owner_id: row.owner_id,
    attributes: row.attributes,
    relationships: row.relationships,
    version: {
      event_id: row.event_id,
      occurred_at: new Date(row.occurred_at).toISOString(),
      position: Number(row.position),
    },
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

/** Built once per expansion, not per parent (picking from a list rebuilt a Map of every child for each parent). */
function byId(resources: ApiResource[]): Map<string, ApiResource> {
  return new Map(resources.map((resource) => [resource.id, resource]));
}

/** The resources of `ids` in order; ids absent from the map, or known to be absent (null), left out. */
function pick(resources: ReadonlyMap<string, ApiResource | null>, ids: string[]): ApiResource[] {
  return ids.flatMap((id) => {
    const found = resources.get(id);
    return found === undefined || found === null ? [] : [found];
  });
}

/** Ids per lookup of children, one lookup at a time. */
const CHILDREN_CHUNKS = { size: 500, concurrency: 1 };

/**
 * The traits and trait options of one expansion (of a product), each looked up once (unknown and
 * deleted ones remembered as absent).
 */
class TraitExpansion {
  private readonly traitsById = new Map<string, ApiResource | null>();
  private readonly optionsById = new Map<string, ApiResource | null>();

  constructor(private readonly lookup: (table: ResourceTable, ids: string[]) => Promise<ApiResource[]>) {}

  /**
   * Follows product → traits → trait options in relationship order (repeats kept, unknown and
   * deleted ones left out); a trait shared by products of the call is expanded once.
   */
  async expand(products: ApiResource[]): Promise<ApiResource[]> {
    const traits = await this.traits(products.flatMap((product) => linkIds(product, 'traits')));
    await this.options(traits.flatMap((trait) => linkIds(trait, 'trait_options')));
    const expandedTraits = new Map<string, ApiResource>();
    const expanded = (trait: ApiResource) => {
      let done = expandedTraits.get(trait.id);
      if (done === undefined) {
        done = { ...trait, trait_options: pick(this.optionsById, linkIds(trait, 'trait_options')) };
        expandedTraits.set(trait.id, done);
      }
      return done;
    };
    return products.map((product) => ({
      ...product,
      traits: pick(this.traitsById, linkIds(product, 'traits')).map(expanded),
    }));
  }

  traits(ids: string[]): Promise<ApiResource[]> {
    return this.fold(RESOURCE_TABLES.trait, this.traitsById, ids);
  }

  options(ids: string[]): Promise<ApiResource[]> {
    return this.fold(RESOURCE_TABLES.trait_option, this.optionsById, ids);
  }

  private async fold(
    table: ResourceTable,
    known: Map<string, ApiResource | null>,
    ids: string[],
  ): Promise<ApiResource[]> {
    const missing = [...new Set(ids)].filter((id) => !known.has(id));
    for (const id of missing) known.set(id, null);
    for (const resource of await this.lookup(table, missing)) known.set(resource.id, resource);
    return pick(known, [...new Set(ids)]);
  }
}

function decodeCursor(cursor: string): string {
  const key = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[01]/.test(key)) throw new BadRequestError('cursor must be a next_cursor value', 'cursor');
  return key;
}

import type { Readable } from 'node:stream';
import { Injectable } from '@nestjs/common';
import { encodeChangeCursor } from '../changes/change-cursor.js';
import { ChangeLogRepository } from '../changes/change-log.repository.js';
import { BadRequestError, NotFoundError } from '../common/app-error.js';
import { readAhead } from '../common/read-ahead.js';
import type { ApiResource } from '../projection/api-resource.js';
import { ReadModelRepository, ResourceDoc, ResourceRow } from './read-model.repository.js';
import { RESOURCE_TABLES, ResourceTable, tableByName } from '../projection/resource-tables.js';
import { MenuDocumentCache } from './menu-document.cache.js';
import { expandedChunk, MenuDocumentRepository, MenuForm, trailerJson, TraitDocs } from './menu-document.repository.js';
import { ListQuery } from './resource-query.dto.js';

export type { ApiResource };

/** Lists, items, expansions and the menu document (docs/reference.md §5), live or `as_of`. */
@Injectable()
export class ResourceQueryService {
  constructor(
    private readonly rows: ReadModelRepository,
    private readonly documents: MenuDocumentRepository,
    private readonly changes: ChangeLogRepository,
    private readonly cache: MenuDocumentCache,
  ) {}

  /**
   * A page as JSON text, with the change-log cursor read in the same snapshot (`changes_cursor`,
   * docs/reference.md §11): following the feed from it misses nothing the page lacks and repeats nothing it
   * has; none with `as_of`. Menu resources (live or `as_of`) and live order resources are each the
   * text PostgreSQL builds, written out without being parsed and serialised again (that work was
   * most of a page's cost in the process); orders `as_of` are folded and serialised.
   */
  async list(name: string, query: ListQuery): Promise<{ body: string; changes_cursor: string | null }> {
    const table = this.table(name);
    const filter = listFilter(query);
    if (query.as_of === undefined) {
      const { rows, position } = await this.rows.findDocsWithChangePosition(table, filter);
      const changesCursor = encodeChangeCursor(position);
      return {
        body: pageText(
          rows.map((row) => row.doc),
          rows,
          query,
          changesCursor,
        ),
        changes_cursor: changesCursor,
      };
    }
    if (table.schema === 'proj_menu') {
      const rows = await this.rows.findDocsAsOf(table, { ...filter, asOf: query.as_of });
      return {
        body: pageText(
          rows.map((row) => row.doc),
          rows,
          query,
          null,
        ),
        changes_cursor: null,
      };
    }
    const rows = await this.rows.find(table, { ...filter, asOf: query.as_of });
    return {
      body: pageText(
        rows.map((row) => JSON.stringify(toResource(table, row))),
        rows,
        query,
        null,
      ),
      changes_cursor: null,
    };
  }

  /**
   * `get` as JSON text, with whether it is deleted (410): the text PostgreSQL builds, but for
   * orders `as_of`, serialised from `get`.
   */
  async getText(name: string, id: string, asOf?: Date): Promise<{ deleted: boolean; body: string }> {
    const table = this.table(name);
    if (asOf !== undefined && table.schema !== 'proj_menu') {
      const resource = await this.get(name, id, asOf);
      return { deleted: resource.deleted, body: JSON.stringify(resource) };
    }
    const [found] =
      asOf === undefined
        ? [await this.rows.findDoc(table, id)]
        : await this.rows.findDocsAsOf(table, { ids: [id], includeDeleted: true, asOf });
    if (found === undefined) throw new NotFoundError(`No ${table.type} ${id} is known.`);
    return { deleted: found.deleted, body: found.doc };
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
    const [expanded] = await this.folder(asOf).expand([product]);
    return expanded;
  }

  async order(id: string, expand: boolean, asOf?: Date): Promise<ApiResource> {
    const order = await this.get('orders', id, asOf);
    if (!expand) return order;
    const products = await this.children(RESOURCE_TABLES.order_product, linkIds(order, 'order_products'), asOf);
    const options = await this.children(
      RESOURCE_TABLES.order_product_trait_option,
      products.flatMap((product) => linkIds(product, 'order_product_trait_options')),
      asOf,
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

  /**
   * `/menu`: every live collection and product of an owner, products expanded (or, `normalized`,
   * products, traits and trait options each listed once). The ETag is the owner's menu version,
   * which the projector bumps in the same transaction as any change to the owner's rows, so an
   * `If-None-Match` that matches costs one index lookup and no body. The body streams in chunks,
   * and is kept (MenuDocumentCache) for the next reads of the same version.
   */
  async menu(ownerId: string, form: MenuForm, ifNoneMatch: string | undefined, asOf?: Date): Promise<MenuAnswer> {
    if (asOf !== undefined) {
      // The past can still change (an older event arriving late leaves the live rows alone): the
      // ETag rests on the log's head, not on the owner's version.
      const etag = menuEtag(`asof-${await this.documents.logHead()}`, form, asOf);
      if (matches(ifNoneMatch, etag)) return { etag, notModified: true };
      return { etag, notModified: false, changesCursor: null, chunks: this.menuAsOf(ownerId, form, asOf) };
    }
    const version = await this.documents.ownerVersion(ownerId);
    const current = menuEtag(version, form);
    if (matches(ifNoneMatch, current)) return { etag: current, notModified: true };
    const kept = await this.cache.open(ownerId, form, version);
    if (kept !== undefined)
      return { etag: current, notModified: false, changesCursor: kept.changesCursor, chunks: kept.body };
    const snapshot = await this.documents.open(
      ownerId,
      form,
      async (db) => ({ changes_cursor: encodeChangeCursor(await this.changes.positionInSnapshot(db)) }),
      () => this.cache.giveWay(),
    );
    const etag = menuEtag(snapshot.version, form);
    if (matches(ifNoneMatch, etag)) {
      await snapshot.close();
      return { etag, notModified: true };
    }
    const changesCursor = snapshot.trailer.changes_cursor as string;
    return {
      etag,
      notModified: false,
      changesCursor,
      close: snapshot.close,
      chunks: this.cache.keep(ownerId, form, snapshot.version, changesCursor, snapshot.chunks),
    };
  }

  /**
   * The menu as of an instant, folded from the log a chunk of products at a time, each resource as
   * the JSON text PostgreSQL builds (findDocsAsOf) and the document spliced from those texts as the
   * live one is. Each trait (with its options) is folded and its text built once per document
   * (products share them), a few lookups at a time; the next chunk of products is folded while
   * this one is expanded.
   */
  private async *menuAsOf(ownerId: string, form: MenuForm, asOf: Date): AsyncGenerator<string | Buffer> {
    const collections = await this.rows.findDocsAsOf(RESOURCE_TABLES.collection, { ownerId, asOf });
    yield `{"collections":[${collections.map((row) => row.doc).join(',')}],"products":[`;
    const traits = new TraitTexts(
      (table, ids, links) =>
        this.inChunks(ids, (chunk) => this.rows.findDocsAsOf(table, { ids: chunk, asOf }, links), MENU_LOOKUPS),
      form,
    );
    const chunkAfter = (after: string | undefined) =>
      readAhead(
        this.rows.findDocsAsOf(
          RESOURCE_TABLES.product,
          { ownerId, asOf, afterSortKey: after, limit: MENU_CHUNK },
          'traits',
        ),
      );
    let next = chunkAfter(undefined);
    let first = true;
    for (;;) {
      const rows = await next;
      if (rows.length === 0) break;
      next = rows.length < MENU_CHUNK ? Promise.resolve([]) : chunkAfter(rows[rows.length - 1].sort_key);
      await traits.expanded.load(rows.flatMap((row) => row.links));
      yield form === 'normalized'
        ? `${first ? '' : ','}${rows.map((row) => row.doc).join(',')}`
        : expandedChunk(
            rows.map((row) => ({ doc: row.doc, traits: row.links })),
            traits.expanded.docs,
            first,
          );
      first = false;
    }
    if (form === 'normalized') {
      const { traits: traitDocs, options } = traits.listed();
      yield `],"traits":[${traitDocs.join(',')}],"trait_options":[${options.join(',')}]${trailerJson({ changes_cursor: null })}}`;
    } else {
      yield `]${trailerJson({ changes_cursor: null })}}`;
    }
  }

  /** Traits and trait options folded (live or `as_of`) once each, for expanding products. */
  private folder(asOf: Date | undefined): TraitExpansion {
    return new TraitExpansion((table, ids) => this.children(table, ids, asOf));
  }

  /** The resources of `ids` (unknown and deleted ones left out). */
  private async children(table: ResourceTable, ids: string[], asOf?: Date): Promise<ApiResource[]> {
    const rows = await this.inChunks(ids, (chunk) => this.rows.find(table, { ids: chunk, asOf }), 1);
    return rows.map((row) => toResource(table, row));
  }

  /** `lookup` of the distinct `ids`, CHILDREN_CHUNK ids a call and `concurrency` calls at a time. */
  private async inChunks<T>(
    ids: string[],
    lookup: (chunk: string[]) => Promise<T[]>,
    concurrency: number,
  ): Promise<T[]> {
    const unique = [...new Set(ids)];
    const chunks: string[][] = [];
    for (let i = 0; i < unique.length; i += CHILDREN_CHUNK) chunks.push(unique.slice(i, i + CHILDREN_CHUNK));
    const found: T[] = [];
    for (let i = 0; i < chunks.length; i += concurrency) {
      for (const rows of await Promise.all(chunks.slice(i, i + concurrency).map(lookup))) found.push(...rows);
    }
    return found;
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

/** `list`'s answer: the resources' JSON texts, and the page's rows for its `next_cursor`. */
function pageText(
  docs: string[],
  rows: Array<{ sort_key: string }>,
  query: ListQuery,
  changesCursor: string | null,
): string {
  const last = rows.at(-1);
  const nextCursor = rows.length === query.limit && last ? Buffer.from(last.sort_key).toString('base64url') : null;
  return `{"data":[${docs.join(',')}],"next_cursor":${JSON.stringify(nextCursor)},"changes_cursor":${JSON.stringify(changesCursor)}}`;
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

/** Products per chunk of an `as_of` menu: each chunk is folded, expanded and serialised on its own. */
const MENU_CHUNK = 250;
/** Ids per lookup of children, and lookups in flight at once for an `as_of` menu. */
const CHILDREN_CHUNK = 500;
const MENU_LOOKUPS = 3;

/**
 * The traits and trait options of one expansion (a product, or a whole `as_of` menu), each looked
 * up once (unknown and deleted ones remembered as absent).
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

/**
 * The traits of an `as_of` menu and their options as JSON texts (ResourceDoc), each trait looked up
 * once (TraitDocs; unknown and deleted ones left out). Expanded: `expanded` holds each trait's
 * text with its options spliced in, in relationship order (repeats kept), ready for expandedChunk,
 * and nothing else is kept (an option named by two traits is looked up for each). Normalized: the
 * texts are kept for `listed`, and none is spliced. (Options outnumber traits: keeping both forms'
 * texts would raise the daemon's peak memory for nothing.)
 */
class TraitTexts {
  readonly expanded: TraitDocs;
  private readonly traits: ResourceDoc[] = [];
  private readonly options = new Map<string, ResourceDoc>();

  constructor(lookup: (table: ResourceTable, ids: string[], links?: string) => Promise<ResourceDoc[]>, form: MenuForm) {
    this.expanded = new TraitDocs(async (ids) => {
      const traits = await lookup(RESOURCE_TABLES.trait, ids, 'trait_options');
      const optionIds = traits.flatMap((trait) => trait.links).filter((id) => !this.options.has(id));
      const options = new Map(
        (await lookup(RESOURCE_TABLES.trait_option, optionIds)).map((option) => [option.id, option]),
      );
      if (form === 'normalized') {
        for (const option of options.values()) this.options.set(option.id, option);
        this.traits.push(...traits);
        return [];
      }
      return traits.map((trait) => {
        const docs = trait.links.flatMap((id) => options.get(id)?.doc ?? []);
        return { id: trait.id, doc: `${trait.doc.slice(0, -1)}, "trait_options" : [${docs.join(', ')}]}` };
      });
    });
  }

  /** The traits folded so far and their options, each listed once in id order (the normalized form). */
  listed(): { traits: string[]; options: string[] } {
    const inOrder = (docs: ResourceDoc[]) =>
      docs.sort((a, b) => (a.sort_key < b.sort_key ? -1 : a.sort_key > b.sort_key ? 1 : 0)).map((doc) => doc.doc);
    return { traits: inOrder([...this.traits]), options: inOrder([...this.options.values()]) };
  }
}

export type MenuAnswer =
  | { etag: string; notModified: true }
  | {
      etag: string;
      notModified: false;
      changesCursor: string | null;
      chunks: AsyncIterable<string | Buffer> | Readable;
      close?: () => Promise<void>;
    };

function menuEtag(version: string, form: MenuForm, asOf?: Date): string {
  return `"menu-${version}-${form === 'normalized' ? 'n' : 'e'}${asOf === undefined ? '' : `-${asOf.getTime()}`}"`;
}

function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  return ifNoneMatch?.split(',').some((tag) => tag.trim() === etag || tag.trim() === `W/${etag}`) ?? false;
}

function decodeCursor(cursor: string): string {
  const key = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[01]/.test(key)) throw new BadRequestError('cursor must be a next_cursor value', 'cursor');
  return key;
}

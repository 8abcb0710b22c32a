import { Injectable, Logger } from '@nestjs/common';
import type { Connection } from '../connections/connection.js';
import { AppConfig } from '../config/app-config.js';
import { MetricsService } from '../observability/metrics.service.js';
import { canonicalId, parseExact } from '../domain/canonical-id.js';
import { UpstreamClient } from '../upstream/upstream-client.js';
import { ReauthorizationRequiredError } from '../upstream/upstream.errors.js';
import type { SnapshotResource } from './snapshot-diff.js';

export const SNAPSHOT_TYPES = ['collection', 'product', 'trait', 'trait_option'] as const;
export type SnapshotType = (typeof SNAPSHOT_TYPES)[number];
const PATHS: Record<SnapshotType, string> = {
  collection: 'collections',
  product: 'products',
  trait: 'traits',
  trait_option: 'trait_options',
};

/** One snapshot document, every page: complete only when every page was read and recognised. */
export interface FetchedList {
  resources: SnapshotResource[];
  complete: boolean;
  error?: string;
}

export interface StoreSnapshot {
  storeId: string;
  /** When the fetch of this store began: the version of the events reconcile derives from it. */
  fetchedAt: Date;
  menu: Record<SnapshotType, FetchedList>;
  orders: FetchedList;
}

/** An answer reconcile does not recognise: logged, counted, and the snapshot marked incomplete. */
class UnrecognisedAnswer extends Error {}

/**
 * The store's first page answered 403 or 404: not a store of this connection's owner (STORE_IDS
 * applies to every connection). The caller leaves the store out of this connection's run.
 */
export class StoreNotOfConnectionError extends Error {
  constructor(
    readonly storeId: string,
    readonly status: number,
  ) {
    super(`store ${storeId} answered ${status}`);
  }
}

/**
 * Reads a store's menu snapshot (docs/reference.md §7 paths, configurable) and its orders (spec endpoint 3)
 * through the upstream client, following JSON:API `links.next`. Nothing here throws for a bad
 * answer: a failed or unrecognised document comes back incomplete with its error. A connection
 * that needs reauthorization throws ReauthorizationRequiredError; a 403/404 to the store's very
 * first request throws StoreNotOfConnectionError; a fired `signal` throws its reason.
 */
@Injectable()
export class SnapshotFetcher {
  private readonly logger = new Logger(SnapshotFetcher.name);

  constructor(
    private readonly upstream: UpstreamClient,
    private readonly config: AppConfig,
    private readonly metrics: MetricsService,
  ) {}

  /** `signal`: the store's deadline; when it fires, the fetch stops with its reason. */
  async fetch(connection: Connection, storeId: string, signal?: AbortSignal): Promise<StoreSnapshot> {
    const fetchedAt = new Date();
    const menu = {} as Record<SnapshotType, FetchedList>;
    for (const type of SNAPSHOT_TYPES) {
      const path = this.config.UPSTREAM_SNAPSHOT_PATH.replace('{store_id}', encodeURIComponent(storeId)).replace(
        '{resources}',
        PATHS[type],
      );
      menu[type] = await this.list(connection, path, type, signal, type === SNAPSHOT_TYPES[0] ? storeId : undefined);
    }
    const ordersPath = this.config.UPSTREAM_ORDERS_PATH.replace('{store_id}', encodeURIComponent(storeId));
    return { storeId, fetchedAt, menu, orders: await this.list(connection, ordersPath, 'order', signal) };
  }

  /** `storeId` is given for the store's first document: a 403/404 to its first page then means "not this connection's store". */
  private async list(
    connection: Connection,
    firstPath: string,
    type: string,
    signal: AbortSignal | undefined,
    storeId?: string,
  ): Promise<FetchedList> {
    const resources: SnapshotResource[] = [];
    let next: { path: string; query: Record<string, string> } | null = { path: firstPath, query: {} };
    try {
      for (let page = 0; next !== null; page++) {
        if (page >= this.config.RECONCILE_MAX_PAGES)
          throw new UnrecognisedAnswer(`more than ${this.config.RECONCILE_MAX_PAGES} pages`);
        const response = await this.upstream.request(connection.id, {
          method: 'GET',
          path: next.path,
          query: next.query,
          versioned: true,
          signal,
        });
        if (page === 0 && storeId !== undefined && (response.status === 403 || response.status === 404)) {
          throw new StoreNotOfConnectionError(storeId, response.status);
        }
        if (response.status !== 200) throw new UnrecognisedAnswer(`answered ${response.status}`);
        const document = recognise(response.json, response.text, type);
        resources.push(...document.data);
        next = document.next === null ? null : relativeTo(connection.baseUrl, document.next);
      }
      return { resources, complete: true };
    } catch (error) {
      // Not a fault of this document: the connection, or this store, is left out (ReconcileService says so).
      if (error instanceof ReauthorizationRequiredError || error instanceof StoreNotOfConnectionError) throw error;
      signal?.throwIfAborted();
      const message = error instanceof Error ? error.message : String(error);
      this.metrics.reconcileSkippedDocuments.inc({ type });
      this.logger.warn({ msg: 'snapshot skipped', type, path: firstPath, error: message });
      return { resources, complete: false, error: `${type} snapshot: ${message}` };
    }
  }
}

/**
 * A JSON:API document of `type` resources; orders carry their related resources from `included`.
 * Ids are read as ingress reads them (canonicalId): numbers from their own text (`text`), when there are any.
 */
function recognise(body: unknown, text: string, type: string): { data: SnapshotResource[]; next: string | null } {
  const document = body as { data?: unknown; included?: unknown; links?: { next?: unknown } } | undefined;
  if (typeof document !== 'object' || document === null || !Array.isArray(document.data)) {
    throw new UnrecognisedAnswer('the answer is not a JSON:API document with a data array');
  }
  const exact =
    hasNumericId(document.data) || hasNumericId(document.included)
      ? (parseExact(text) as { data: unknown[]; included?: unknown[] })
      : undefined;
  const data = document.data.map((item, index) => resource(item, exact?.data[index], `data[${index}]`));
  const wrong = data.find((item) => item.type !== type);
  if (wrong !== undefined) throw new UnrecognisedAnswer(`data holds a ${wrong.type}, expected ${type}`);
  const next = document.links?.next;
  if (next !== undefined && next !== null && typeof next !== 'string')
    throw new UnrecognisedAnswer('links.next is not a string');
  if (type === 'order') {
    const included = Array.isArray(document.included)
      ? document.included.map((item, index) => resource(item, exact?.included?.[index], `included[${index}]`))
      : [];
    for (const order of data) order.related = relatedOf(order, included);
  }
  return { data, next: typeof next === 'string' ? next : null };
}

function hasNumericId(items: unknown): boolean {
  return Array.isArray(items) && items.some((item) => typeof (item as { id?: unknown } | null)?.id === 'number');
}

/** `exact`: the same item parsed with numbers kept as text (only its `id` is read). */
function resource(item: unknown, exact: unknown, where: string): SnapshotResource {
  const candidate = item as (Partial<SnapshotResource> & { id?: unknown }) | null;
  const id = canonicalId(exact === undefined ? candidate?.id : (exact as { id?: unknown }).id);
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    id === undefined ||
    typeof candidate.type !== 'string' ||
    typeof candidate.attributes !== 'object' ||
    candidate.attributes === null
  ) {
    throw new UnrecognisedAnswer(`${where} is not a resource object`);
  }
  return { id, type: candidate.type, attributes: candidate.attributes, relationships: candidate.relationships ?? {} };
}

/** What an order event includes, from the list's `included`: the order products, their trait options, the store and the user. */
function relatedOf(order: SnapshotResource, included: SnapshotResource[]): SnapshotResource[] {
  const byKey = new Map(included.map((item) => [`${item.type}:${item.id}`, item]));
  const linked = (resource: SnapshotResource, name: string): SnapshotResource[] => {
    const data = (resource.relationships?.[name] as { data?: unknown } | undefined)?.data;
    const identifiers = Array.isArray(data) ? data : data ? [data] : [];
    return identifiers
      .map((identifier: { id: unknown; type: string }) => byKey.get(`${identifier.type}:${canonicalId(identifier.id)}`))
      .filter((found): found is SnapshotResource => found !== undefined);
  };
  const products = linked(order, 'order_products');
  return [
    ...products,
    ...products.flatMap((product) => linked(product, 'order_product_trait_options')),
    ...linked(order, 'store'),
    ...linked(order, 'user'),
  ];
}

/** A `links.next` URL as a path under the connection's base URL; another origin or base path is refused. */
function relativeTo(baseUrl: string, link: string): { path: string; query: Record<string, string> } {
  const base = new URL(baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
  const url = new URL(link, base);
  if (url.origin !== base.origin || !url.pathname.startsWith(base.pathname))
    throw new UnrecognisedAnswer('links.next leaves the upstream');
  return { path: `/${url.pathname.slice(base.pathname.length)}`, query: Object.fromEntries(url.searchParams) };
}

import { Inject, Injectable } from '@nestjs/common';
import { apiError, EmulatorHttpError } from '../emulator-http.error.js';
import { EMULATOR_OPTIONS } from '../emulator-options.js';
import type { EmulatorOptions } from '../emulator-options.js';
import { FaultSettings } from '../fault-settings.js';
import { OAuthServer } from '../oauth/oauth-server.service.js';
import type { ResourceObject } from '../platform-event.js';
import { EmulatorState } from '../state/emulator-state.service.js';
import { MENU_PATHS } from '../state/resource-schemas.js';

/** A JSON:API document of one page. */
export interface ApiDocument {
  data: ResourceObject[];
  included?: ResourceObject[];
  links: { self: string; first: string; next: string | null };
  meta: { total_count: number; page: number; page_size: number };
}

/** The request facts a page needs: the authorization header, the path and the page parameters. */
export interface PageRequest {
  authorization: string | undefined;
  baseUrl: string;
  path: string;
  query: Record<string, unknown>;
}

const MAX_PAGE_SIZE = 500;

/**
 * The platform's read API: the store's orders (spec endpoint 3) and the menu snapshot paths that
 * reconcile uses (docs/reference.md §7), paginated JSON:API documents for the token's own stores only.
 */
@Injectable()
export class PlatformApiService {
  constructor(
    @Inject(EMULATOR_OPTIONS) private readonly options: EmulatorOptions,
    private readonly oauth: OAuthServer,
    private readonly state: EmulatorState,
    private readonly faults: FaultSettings,
  ) {}

  menuSnapshot(storeId: string, path: string, request: PageRequest): ApiDocument {
    const type = MENU_PATHS[path];
    if (type === undefined) throw apiError(404, 'Not Found', `no resource collection ${path}`);
    this.admit(storeId, 'read_menu', request);
    return this.page(this.state.menuOf(storeId, type), request);
  }

  orders(storeId: string, request: PageRequest): ApiDocument {
    this.admit(storeId, 'read_orders', request);
    const records = this.state.ordersOf(storeId);
    const document = this.page(
      records.map((record) => record.order),
      request,
    );
    const shown = new Set(document.data.map((order) => order.id));
    const included = new Map<string, ResourceObject>();
    for (const record of records.filter((order) => shown.has(order.id))) {
      for (const resource of this.state.orderIncluded(record)) {
        if (resource.type !== 'order') included.set(`${resource.type}:${resource.id}`, resource);
      }
    }
    return { ...document, included: [...included.values()] };
  }

  /** Injected faults first (an outage answers before authentication), then the token, then ownership. */
  private admit(storeId: string, scope: string, request: PageRequest): void {
    const faults = this.faults.current;
    if (this.faults.takeApiFailure()) {
      const status = faults.api_error_status;
      throw apiError(
        status,
        status === 429 ? 'Too Many Requests' : 'Service Error',
        'injected fault',
        undefined,
        status === 429 || status === 503 ? { 'Retry-After': '1' } : {},
      );
    }
    const principal = this.oauth.authenticate(request.authorization, scope);
    const store = this.state.store(storeId);
    if (store === undefined || store.ownerId !== principal.userId)
      throw apiError(404, 'Not Found', `no store ${storeId}`);
    if (faults.api_garbage)
      throw new EmulatorHttpError(
        200,
        '<html><body><h1>We will be right back</h1></body></html>',
        'text/html; charset=utf-8',
      );
  }

  private page(all: ResourceObject[], request: PageRequest): ApiDocument {
    const number = pageParameter(request.query, 'number', 1, Number.MAX_SAFE_INTEGER);
    const size = pageParameter(request.query, 'size', this.options.pageSize, MAX_PAGE_SIZE);
    const link = (page: number) => `${request.baseUrl}${request.path}?page%5Bnumber%5D=${page}&page%5Bsize%5D=${size}`;
    const start = (number - 1) * size;
    return {
      data: all.slice(start, start + size),
      links: { self: link(number), first: link(1), next: start + size < all.length ? link(number + 1) : null },
      meta: { total_count: all.length, page: number, page_size: size },
    };
  }
}

function pageParameter(query: Record<string, unknown>, name: string, fallback: number, max: number): number {
  const raw = query[`page[${name}]`] ?? (query.page as Record<string, unknown> | undefined)?.[name];
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw apiError(400, 'Bad Request', `page[${name}] must be an integer from 1 to ${max}`, undefined);
  }
  return value;
}

// A fake ordering platform on loopback for reconcile's benchmark and tests: the spec's OAuth
// authorization (approved at once), token exchange and refresh, Doorkeeper's token introspection,
// webhook endpoints, and the menu snapshot and order list paths of every store, each answered
// after `latencyMs`. Plain node:http, so that the bench needs no build; it records every API
// request (who, which store, when it arrived and was answered), the requests in flight, and takes
// a `fault` hook (a storm of 429s, a store that hangs).
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

const MENU = ['collections', 'products', 'traits', 'trait_options', 'orders'];
const API = /^\/stores\/([^/]+)\/(collections|products|traits|trait_options|orders)$/;

const moneyMap = (cents) => ({ GBP: { cents, format: `£${(cents / 100).toFixed(2)}`, currency: { iso_code: 'GBP' } } });

/** Store n's products (ids 1000000 + 10n + i) and its one collection (2000000 + n). */
export function storeMenu(storeId, { productsPerStore = 3, titles = new Map() } = {}) {
  const n = Number(storeId);
  const productIds = Array.from({ length: productsPerStore }, (_, i) => String(1_000_000 + n * 10 + i));
  return {
    collections: [
      {
        id: String(2_000_000 + n),
        type: 'collection',
        attributes: { id: 2_000_000 + n, title: `Collection of store ${storeId}` },
        relationships: { products: { data: productIds.map((id) => ({ id, type: 'product' })) } },
      },
    ],
    products: productIds.map((id) => ({
      id,
      type: 'product',
      attributes: {
        id: Number(id),
        title: titles.get(id) ?? `Product ${id}`,
        description: `The description of product ${id}.`,
        available: true,
        base_cost: moneyMap(850),
      },
      relationships: {
        traits: { data: [] },
        externally_managed_product_override: { data: null },
      },
    })),
    traits: [],
    trait_options: [],
    orders: [],
  };
}

/**
 * Starts the platform. `users`: [{ id, stores: [storeId…] }]; the n-th authorization is approved
 * as the n-th user (cycling). `fault(request)` may answer instead of the platform: undefined (no
 * fault), 'hang' (never answers), or { status, headers, body }. Returns { url, requests, inFlight,
 * maxInFlight, callbacks, rename(productId, title), close() }.
 */
export async function startFakePlatform({ users, latencyMs = 0, productsPerStore = 3, fault = () => undefined }) {
  const tokens = new Map(); // access token -> user id
  const codes = new Map(); // code -> user id
  const storesOf = new Map(users.map((user) => [user.id, new Set(user.stores.map(String))]));
  const titles = new Map();
  const hanging = new Set();
  let authorizations = 0;
  const platform = {
    url: '',
    /** Every API request: { user, storeId, resource, arrivedAt, answeredAt, status }. */
    requests: [],
    inFlight: 0,
    maxInFlight: 0,
    /** How long each answer takes; may be changed while the platform runs. */
    latencyMs,
    /** The most requests of one store (of one user) in flight at once: more than 1 means two fetchers at once. */
    maxInFlightPerStore: 0,
    /** Callback URIs registered, by user id. */
    callbacks: new Map(),
    fault,
    rename: (productId, title) => titles.set(String(productId), title),
    /** An access token of `user`, for a bare client beside the daemon. */
    tokenFor: (user) => issue(user).access_token,
    close: () =>
      new Promise((resolve) => {
        for (const response of hanging) response.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  const issue = (user) => {
    const access = `access-${randomUUID()}`;
    tokens.set(access, user);
    const answer = {
      access_token: access,
      token_type: 'Bearer',
      expires_in: 21600,
      refresh_token: `refresh-${user}-${randomUUID()}`,
      created_at: Math.floor(Date.now() / 1000),
    };
    return answer;
  };
  const userOf = (request) => tokens.get((request.headers.authorization ?? '').replace(/^Bearer /, ''));
  const json = (response, status, body, headers = {}) => {
    response.writeHead(status, { 'content-type': 'application/json', ...headers });
    response.end(JSON.stringify(body));
  };

  const ofStore = new Map(); // user/store -> requests in flight
  async function api(request, response, url, [, storeId, resource]) {
    const entry = { user: userOf(request), storeId, resource, arrivedAt: Date.now(), answeredAt: 0, status: 0 };
    platform.requests.push(entry);
    platform.inFlight++;
    platform.maxInFlight = Math.max(platform.maxInFlight, platform.inFlight);
    const key = `${entry.user}/${storeId}`;
    ofStore.set(key, (ofStore.get(key) ?? 0) + 1);
    platform.maxInFlightPerStore = Math.max(platform.maxInFlightPerStore, ofStore.get(key));
    // A request ends when answered, or when its client goes away first (a process killed).
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      ofStore.set(key, ofStore.get(key) - 1);
    };
    response.on('close', end);
    const answer = (status, body, headers) => {
      entry.status = status;
      entry.answeredAt = Date.now();
      platform.inFlight--;
      end();
      json(response, status, body, headers);
    };
    const faulty = platform.fault(entry);
    if (faulty === 'hang') {
      hanging.add(response);
      response.on('close', () => {
        if (entry.answeredAt === 0) platform.inFlight--;
        entry.answeredAt = entry.answeredAt || Date.now();
        hanging.delete(response);
      });
      return;
    }
    if (faulty !== undefined) return answer(faulty.status, faulty.body ?? { errors: [] }, faulty.headers);
    if (platform.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, platform.latencyMs));
    if (entry.user === undefined) return answer(401, { errors: [{ status: '401', title: 'Unauthorized' }] });
    if (!storesOf.get(entry.user)?.has(storeId))
      return answer(404, { errors: [{ status: '404', title: 'Not Found' }] });
    answer(200, { data: storeMenu(storeId, { productsPerStore, titles })[resource], links: { next: null } });
  }

  async function handle(request, response) {
    const url = new URL(request.url, platform.url);
    const route = API.exec(url.pathname);
    if (request.method === 'GET' && route) return api(request, response, url, route);
    const body = request.method === 'POST' ? new URLSearchParams(await text(request)) : new URLSearchParams();
    if (request.method === 'GET' && url.pathname === '/oauth/authorize') {
      const user = users[authorizations++ % users.length].id;
      const code = `code-${randomUUID()}`;
      codes.set(code, user);
      const back = new URL(url.searchParams.get('redirect_uri'));
      back.searchParams.set('code', code);
      back.searchParams.set('state', url.searchParams.get('state') ?? '');
      response.writeHead(302, { location: back.toString() });
      return response.end();
    }
    if (request.method === 'POST' && url.pathname === '/oauth/token') {
      if (body.get('grant_type') === 'authorization_code' && codes.has(body.get('code'))) {
        const user = codes.get(body.get('code'));
        codes.delete(body.get('code'));
        return json(response, 200, issue(user));
      }
      const refreshed = /^refresh-(.+)-[0-9a-f-]{36}$/.exec(body.get('refresh_token') ?? '');
      if (body.get('grant_type') === 'refresh_token' && refreshed) return json(response, 200, issue(refreshed[1]));
      return json(response, 400, { error: 'invalid_grant' });
    }
    if (request.method === 'GET' && url.pathname === '/oauth/token/info') {
      const user = userOf(request);
      return user === undefined ? json(response, 401, {}) : json(response, 200, { resource_owner_id: user });
    }
    if (request.method === 'POST' && url.pathname === '/webhook_endpoints') {
      const user = userOf(request);
      if (user === undefined) return json(response, 401, {});
      platform.callbacks.set(user, body.get('callback_uri'));
      return json(response, 201, {
        data: { id: randomUUID(), type: 'webhook_endpoint', attributes: { callback_uri: body.get('callback_uri') } },
      });
    }
    json(response, 404, { errors: [{ status: '404' }] });
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error) => {
      response.writeHead(500);
      response.end(String(error));
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  platform.url = `http://127.0.0.1:${server.address().port}`;
  return platform;
}

/** The most requests that arrived within any `windowMs` (a sliding window over the arrivals). */
export function mostInWindow(arrivals, windowMs = 1000) {
  const sorted = [...arrivals].sort((a, b) => a - b);
  let most = 0;
  for (let first = 0, last = 0; last < sorted.length; last++) {
    while (sorted[last] - sorted[first] >= windowMs) first++;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

/** The store documents one store's pass asks for. */
export const DOCUMENTS_PER_STORE = MENU.length;

function text(request) {
  return new Promise((resolve, reject) => {
    let data = '';
    request.setEncoding('utf8');
    request.on('data', (chunk) => (data += chunk));
    request.on('end', () => resolve(data));
    request.on('error', reject);
  });
}

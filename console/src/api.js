/** Calls to the daemon's /api with the operator's token (kept for the tab), or none on loopback. */
const TOKEN_KEY = 'menu-sync.api-token';

export const tokenStore = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (token) => sessionStorage.setItem(TOKEN_KEY, token),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, detail, body) {
    super(detail);
    this.status = status;
    this.body = body;
  }
}

/** Listeners told when the daemon answers 401 (the app then asks for a token). */
const unauthorizedListeners = new Set();
export const onUnauthorized = (listener) => {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
};

function headers(extra = {}) {
  const token = tokenStore.get();
  return token ? { ...extra, authorization: `Bearer ${token}` } : extra;
}

async function send(path, init = {}) {
  let response;
  try {
    response = await fetch(path, { ...init, headers: headers(init.headers) });
  } catch {
    throw new ApiError(0, 'The daemon does not answer. Is it running?');
  }
  if (response.status === 401) unauthorizedListeners.forEach((listener) => listener());
  return response;
}

async function failure(response) {
  let detail = `${response.status} ${response.statusText}`;
  let body;
  try {
    body = await response.json();
    detail = body.detail ?? body.title ?? detail;
  } catch {
    /* not JSON */
  }
  return new ApiError(response.status, detail, body);
}

/** GET a JSON document; a problem+json answer becomes an ApiError with its detail. */
export async function getJson(path) {
  const response = await send(path);
  if (!response.ok) throw await failure(response);
  return response.json();
}

export async function postJson(path, body) {
  const response = await send(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

export async function patchJson(path, body) {
  const response = await send(path, {
    method: 'PATCH',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  return response.json();
}

export async function deleteJson(path) {
  const response = await send(path, { method: 'DELETE' });
  if (!response.ok) throw await failure(response);
}

/**
 * What this tab's token may do: "admin", or "read" (a read: entry of API_TOKENS, which may only
 * read). A daemon without /api/v1/whoami predates read tokens: every token there is an admin's.
 */
export async function getRole() {
  try {
    return (await getJson('/api/v1/whoami')).role;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return 'admin';
    throw error;
  }
}

/** The exact bytes of an event, opened in a new tab (a link cannot carry the bearer token). */
export async function openRaw(position) {
  const response = await send(`/api/v1/events/${position}/raw`);
  if (!response.ok) throw await failure(response);
  const blob = await response.blob();
  window.open(URL.createObjectURL(new Blob([blob], { type: 'text/plain' })), '_blank', 'noopener');
}

/** Prometheus text format → [{name, labels, value}] (what the Activity charts sample). */
export async function getMetrics() {
  const response = await send('/metrics');
  if (!response.ok) throw await failure(response);
  const samples = [];
  for (const line of (await response.text()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key] = value;
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

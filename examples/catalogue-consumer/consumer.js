// A catalogue consumer for menu-sync (docs/reference.md §11), small enough to copy.
//
//   node consumer.js webhook   receive an HTTP sink: verify, deduplicate by webhook-id, apply
//   node consumer.js feed      bootstrap from GET /api/v1/menu, then follow the SSE feed /api/v1/changes
//
// Either way the catalogue is CATALOGUE_FILE (default ./catalogue.json): the newest state of every
// resource, keyed "type/id". Changes carry full state, so keeping the newest one per resource is all
// there is to it; `seq` orders changes, and an older one arriving later is ignored.
import { createServer } from 'node:http';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { Webhook } from 'standardwebhooks';

const FILE = process.env.CATALOGUE_FILE ?? './catalogue.json';

/** { resources: {"product/12": change}, seen_webhook_ids: [...], cursor: string|null } */
async function load() {
  try {
    return JSON.parse(await readFile(FILE, 'utf8'));
  } catch {
    return { resources: {}, seen_webhook_ids: [], cursor: null };
  }
}

/** Written whole and renamed into place: a crash never leaves half a file. */
async function save(state) {
  await writeFile(`${FILE}.tmp`, JSON.stringify(state, null, 2));
  await rename(`${FILE}.tmp`, FILE);
}

/** Keeps the newest change of each resource (a delete stays, marked deleted, so an older upsert cannot revive it). */
function apply(state, change) {
  const key = `${change.type}/${change.id}`;
  const known = state.resources[key];
  if (known === undefined || known.seq < change.seq) state.resources[key] = change;
}

// --- 1. From an HTTP sink -------------------------------------------------------------------------
// Create the sink:  curl -X POST $MENU_SYNC/api/v1/sinks -H 'content-type: application/json' \
//                     -d '{"kind":"http","url":"http://127.0.0.1:8080/hook"}'
// (the daemon run with SINK_ALLOWED_NETWORKS=127.0.0.0/8: sinks reach no loopback address otherwise)
// and start this with the "secret" of the answer: WEBHOOK_SECRET=whsec_... node consumer.js webhook
async function webhook() {
  const secrets = (process.env.WEBHOOK_SECRET ?? '').split(/[\s,]+/).filter(Boolean); // two during a rotation
  if (secrets.length === 0) throw new Error("set WEBHOOK_SECRET to the sink's whsec_ secret");
  const verifiers = secrets.map((secret) => new Webhook(secret));
  const state = await load();
  const seen = new Set(state.seen_webhook_ids);
  let queue = Promise.resolve();

  createServer(async (request, response) => {
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    const body = Buffer.concat(chunks).toString('utf8');
    const batch = verifiers
      .map((webhook) => {
        try {
          return webhook.verify(body, request.headers);
        } catch {
          return null;
        }
      })
      .find((verified) => verified !== null);
    if (!batch) return response.writeHead(401).end(); // not signed with our secret, or too old (replayed)
    const id = request.headers['webhook-id'];
    // One batch at a time, stored before the 2XX: menu-sync moves its cursor only on our 2XX.
    queue = queue
      .then(async () => {
        if (!seen.has(id)) {
          // a retry of a batch we already stored: acknowledge, change nothing
          for (const change of batch.data) apply(state, change);
          seen.add(id);
          state.seen_webhook_ids = [...seen].slice(-10000);
          await save(state);
        }
        response.writeHead(204).end();
      })
      .catch(() => response.writeHead(500).end()); // 5XX: menu-sync retries the same batch later
  }).listen(Number(process.env.PORT ?? 8080), '127.0.0.1', () =>
    console.log(`catalogue consumer on :${process.env.PORT ?? 8080}/hook, file ${FILE}`),
  );
}

// --- 2. Pull: bootstrap from /menu, then follow the SSE feed --------------------------------------
// MENU_SYNC=http://127.0.0.1:3000 OWNER_ID=1 [API_TOKEN=...] node consumer.js feed
async function feed() {
  const base = process.env.MENU_SYNC ?? 'http://127.0.0.1:3000';
  const owner = process.env.OWNER_ID;
  if (!owner) throw new Error('set OWNER_ID to the owner whose menu to keep');
  const headers = process.env.API_TOKEN ? { authorization: `Bearer ${process.env.API_TOKEN}` } : {};
  let state = await load();
  for (;;) {
    if (state.cursor === null) state = await bootstrap(base, owner, headers);
    try {
      await follow(base, owner, headers, state);
    } catch (error) {
      if (error.status === 410) {
        // our cursor is older than the change log keeps: start over
        state = { resources: {}, seen_webhook_ids: [], cursor: null };
        continue;
      }
      console.error(`feed interrupted (${error.message}); resuming from ${state.cursor} in 2 s`);
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
}

/** The whole menu and the cursor consistent with it (X-Changes-Cursor): nothing missed, nothing twice. */
async function bootstrap(base, owner, headers) {
  const response = await fetch(`${base}/api/v1/menu?owner_id=${encodeURIComponent(owner)}`, { headers });
  if (!response.ok) throw new Error(`GET /api/v1/menu answered ${response.status}`);
  const menu = await response.json();
  const state = {
    resources: {},
    seen_webhook_ids: [],
    cursor: response.headers.get('x-changes-cursor') ?? menu.changes_cursor,
  };
  for (const collection of menu.collections)
    state.resources[`collection/${collection.id}`] = {
      type: 'collection',
      id: collection.id,
      op: 'upsert',
      seq: 0,
      resource: collection,
    };
  for (const { traits, ...product } of menu.products) {
    state.resources[`product/${product.id}`] = {
      type: 'product',
      id: product.id,
      op: 'upsert',
      seq: 0,
      resource: product,
    };
    for (const { trait_options: options = [], ...trait } of traits ?? []) {
      state.resources[`trait/${trait.id}`] = { type: 'trait', id: trait.id, op: 'upsert', seq: 0, resource: trait };
      for (const option of options)
        state.resources[`trait_option/${option.id}`] = {
          type: 'trait_option',
          id: option.id,
          op: 'upsert',
          seq: 0,
          resource: option,
        };
    }
  }
  await save(state);
  return state;
}

/** Server-Sent Events: `id:` is the cursor, `data:` the change; Last-Event-ID resumes after it. */
async function follow(base, owner, headers, state) {
  const response = await fetch(`${base}/api/v1/changes?owner_id=${encodeURIComponent(owner)}`, {
    headers: { ...headers, accept: 'text/event-stream', 'last-event-id': state.cursor },
  });
  if (!response.ok)
    throw Object.assign(new Error(`GET /api/v1/changes answered ${response.status}`), { status: response.status });
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = parseEvent(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (event.event !== 'change' || event.data === undefined) continue; // heartbeats are comments
      apply(state, JSON.parse(event.data));
      state.cursor = event.id;
      await save(state);
    }
  }
  throw new Error('the feed ended');
}

function parseEvent(text) {
  const event = {};
  for (const line of text.split('\n')) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    event[field] = field === 'data' && event.data !== undefined ? `${event.data}\n${value}` : value;
  }
  return event;
}

const mode = process.argv[2];
if (mode === 'webhook') await webhook();
else if (mode === 'feed') await feed();
else {
  console.error('usage: node consumer.js webhook|feed');
  process.exit(2);
}

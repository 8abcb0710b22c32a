// The query baseline: a bare Node `http` server with a `pg.Pool` doing the same reads as the
// daemon's query API with the same SQL (the daemon's own statements, imported from dist/), and
// nothing else: no framework, no validation, no streaming through cursors (a whole /menu section
// is one string_agg), no request log.
//
//   DATABASE_URL=postgres://... PORT=3200 [HOST=127.0.0.1] [POOL_SIZE=10] node bench/query-baseline-server.js
import { createServer } from 'node:http';
import pg from 'pg';
import { expandedChunk } from '../dist/src/menu/document-text.js';
import { menuSections } from '../dist/src/menu/menu-sections.js';
import { asOfStatement, GENERIC_PLANS } from './lib/query-statements.js';

const poolConfig = {
  connectionString: process.env.DATABASE_URL,
  max: Number(process.env.POOL_SIZE ?? 10),
  application_name: 'menu-sync-bench-query-baseline',
};
const pool = new pg.Pool(poolConfig);
// As the daemon: its as_of statements on sessions of their own that plan them generically.
const asOfPool = new pg.Pool({ ...poolConfig, options: GENERIC_PLANS });

const ROW = `SELECT id, sort_key, owner_id, attributes, relationships, deleted, occurred_at, event_id, position::text AS position
  FROM proj_menu.products`;

function resource(row) {
  return {
    type: 'product',
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

/** A statement as the daemon runs it: prepared under its name when it has one (the as_of statements, on their pool). */
function run({ sql, params, name }) {
  return name === undefined ? pool.query(sql, params) : asOfPool.query({ name, text: sql, values: params });
}

function send(response, status, text, headers = {}) {
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}

async function handle(request, response) {
  const url = new URL(request.url, 'http://localhost');
  const asOf = url.searchParams.get('as_of');
  const owner = url.searchParams.get('owner_id');
  if (url.pathname === '/health/live') return send(response, 200, '{"status":"ok"}');
  if (url.pathname === '/api/v1/menu') {
    const form = url.searchParams.get('form') === 'normalized' ? 'normalized' : 'expanded';
    const {
      rows: [{ version }],
    } = await pool.query(
      `SELECT coalesce((SELECT version FROM proj_menu.owner_versions WHERE owner_id = $1), 0)::text AS version`,
      [owner],
    );
    const etag = `"menu-${version}-${form === 'normalized' ? 'n' : 'e'}"`;
    if (request.headers['if-none-match'] === etag) {
      response.writeHead(304, { etag });
      return response.end();
    }
    const parts = [];
    for (const section of menuSections(form)) {
      if (section.traits !== undefined) {
        // Expanded products: the trait texts spliced in by id, as the daemon does.
        const { rows } = await pool.query(section.sql, [owner]);
        const named = [...new Set(rows.flatMap((row) => row.traits))];
        const traits = new Map(
          (await pool.query(section.traits, [named])).rows.map((row) => [row.id, Buffer.from(row.doc)]),
        );
        parts.push(
          Buffer.concat([Buffer.from(`"${section.key}":[`), expandedChunk(rows, traits, true), Buffer.from(']')]),
        );
        continue;
      }
      const {
        rows: [{ items }],
      } = await pool.query(
        `SELECT coalesce(string_agg(doc, ',' ORDER BY n), '') AS items
        FROM (SELECT doc, row_number() OVER () AS n FROM (${section.sql}) s) t`,
        [owner],
      );
      parts.push(Buffer.from(`"${section.key}":[${items}]`));
    }
    return send(
      response,
      200,
      Buffer.concat([
        Buffer.from('{'),
        ...parts.flatMap((part, i) => (i === 0 ? [part] : [Buffer.from(','), part])),
        Buffer.from('}'),
      ]),
      { etag },
    );
  }
  const byId = /^\/api\/v1\/products\/([^/]+)$/.exec(url.pathname);
  if (byId) {
    const id = decodeURIComponent(byId[1]);
    const statement = asOf
      ? await asOfStatement({ ids: [id], includeDeleted: true, asOf: new Date(asOf) })
      : { sql: `${ROW} WHERE id = $1`, params: [id] };
    const { rows } = await run(statement);
    if (rows.length === 0) return send(response, 404, '{"status":404}');
    return send(response, rows[0].deleted ? 410 : 200, JSON.stringify(resource(rows[0])));
  }
  if (url.pathname === '/api/v1/products') {
    const limit = Number(url.searchParams.get('limit') ?? 100);
    const statement = asOf
      ? await asOfStatement({ ownerId: owner, limit, asOf: new Date(asOf) })
      : { sql: `${ROW} WHERE owner_id = $1 AND NOT deleted ORDER BY sort_key LIMIT $2`, params: [owner, limit] };
    const { rows } = await run(statement);
    const last = rows.at(-1);
    return send(
      response,
      200,
      JSON.stringify({
        data: rows.map(resource),
        next_cursor: rows.length === limit && last ? Buffer.from(last.sort_key).toString('base64url') : null,
      }),
    );
  }
  return send(response, 404, '{"status":404}');
}

const server = createServer((request, response) => {
  request.resume();
  handle(request, response).catch((error) => send(response, 503, JSON.stringify({ error: error.message })));
});
server.listen(Number(process.env.PORT ?? 3200), process.env.HOST ?? '127.0.0.1');
process.on('SIGTERM', () => server.close(() => pool.end().then(() => process.exit(0))));

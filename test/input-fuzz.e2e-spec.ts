import { connect } from 'node:net';
import fc from 'fast-check';
import pg from 'pg';
import { API_TOKEN, RunningDaemon, startDaemon, WEBHOOK_KEY } from './support/http.js';
import { webhookEvent } from './support/webhook-events.js';

/**
 * Any input gets a 4XX problem+json or a normal answer, never a 5XX (issue 11, item 1). Every
 * route the daemon documents in /api/docs-json, plus the webhook route and /auth/*, is sent
 * arbitrary path and query values (NUL, lone surrogates, bare and undecodable `%` sequences,
 * 10 kB values, huge and negative numbers, repeated and array parameters) and arbitrary header
 * values, over a raw socket so that no client library cleans them up on the way.
 */

interface Route {
  method: 'GET' | 'POST';
  path: string;
  pathParams: string[];
  queryParams: string[];
}

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The longest request sent: below Node's 16 KiB header limit, so the server always reads it whole. */
const MAX_REQUEST_BYTES = 15_000;

/** `%` sequences written as they go on the wire: bare, truncated, not hex, overlong, not UTF-8, surrogates. */
const RAW_PERCENT = [
  '%',
  '%%',
  '%0',
  '%ZZ',
  '%00',
  '%2500',
  '%C0%80',
  '%C0%AF',
  '%FF',
  '%FE%FF',
  '%ED%A0%80',
  '%ED%BF%BF',
  '%F4%90%80%80',
  '%E2%82',
  '%u0000',
  '%uD800',
  '+',
  '&',
  '=',
  '[]',
  '[0]',
  '%5B%5D',
  '..',
  '%2e%2e%2f',
  '%2F',
  '\\',
  '"',
  "'",
];

/** Percent-encodes every UTF-16 code unit; a lone surrogate becomes its 3-byte (WTF-8) form, as a careless client sends it. */
function wireEncode(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    const next = text.charCodeAt(i + 1);
    if (unit >= 0xd800 && unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      out += encodeURIComponent(text.slice(i, i + 2));
      i++;
    } else if (unit >= 0xd800 && unit <= 0xdfff) {
      out += [0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase()}`)
        .join('');
    } else {
      out += encodeURIComponent(text[i]);
    }
  }
  return out;
}

const numberText = fc.oneof(
  fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }).map(String),
  fc.double().map(String),
  fc.integer().map(String),
  fc.constantFrom(
    '-1',
    '0',
    '-0',
    '1e400',
    '1e-400',
    '9007199254740993',
    '0x10',
    '1_000',
    'NaN',
    'Infinity',
    '-Infinity',
    '1.5',
    ' 1',
    '01',
  ),
);

/** A value as it is written on the wire (already percent-encoded, or deliberately not). */
const wireValue: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }).map(wireEncode) },
  {
    weight: 2,
    arbitrary: fc
      .string({ unit: fc.constantFrom('\0', '\uD800', '\uDFFF', 'a', '😀', '\u202E', '\n', ' '), maxLength: 8 })
      .map(wireEncode),
  },
  {
    weight: 2,
    arbitrary: fc
      .array(fc.oneof(fc.constantFrom(...RAW_PERCENT), fc.string({ maxLength: 4 }).map(wireEncode)), {
        minLength: 1,
        maxLength: 5,
      })
      .map((parts) => parts.join('')),
  },
  { weight: 2, arbitrary: numberText.map(wireEncode) },
  {
    weight: 1,
    arbitrary: fc
      .date({ noInvalidDate: false })
      .map((date) => wireEncode(Number.isNaN(date.getTime()) ? 'Invalid Date' : date.toISOString())),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom('a', '0', '%00', '%ED%A0%80', '9'), fc.integer({ min: 1025, max: 10_000 }))
      .map(([unit, chars]) => unit.repeat(Math.ceil(chars / unit.length))),
  },
);

/**
 * Whether a request of the change feed asks for a valid long-poll (`wait` of 1–60 s): a normal
 * answer, but one that takes up to a minute; fast-check's integers are mostly small, so such waits
 * added up past the test's time limit. Garbage in `wait` is still sent.
 */
function longPolls(path: string, query: string): boolean {
  if (path !== '/api/v1/changes') return false;
  return new URLSearchParams(query).getAll('wait').some((value) => {
    const seconds = Number(value);
    return Number.isInteger(seconds) && seconds >= 1 && seconds <= 60;
  });
}

/** A query string: the route's own parameters and others, each possibly repeated or in array form. */
function queryOf(route: Route): fc.Arbitrary<string> {
  const names = route.queryParams.length > 0 ? route.queryParams : ['limit'];
  const name = fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...names) },
    { weight: 1, arbitrary: fc.constantFrom(...names).map((known) => `${known}[]`) },
    { weight: 1, arbitrary: fc.constantFrom(...names).map((known) => `${known}%5B0%5D`) },
    { weight: 1, arbitrary: wireValue.map((text) => text.slice(0, 64)) },
  );
  const pair = fc.oneof(
    { weight: 6, arbitrary: fc.tuple(name, wireValue).map(([key, value]) => `${key}=${value}`) },
    { weight: 1, arbitrary: name },
    { weight: 1, arbitrary: fc.tuple(name, wireValue).map(([key, value]) => `${key}=${value}&${key}=${value}`) },
  );
  return fc.array(pair, { maxLength: 5 }).map((pairs) => pairs.join('&'));
}

function pathOf(route: Route): fc.Arbitrary<string> {
  return fc
    .array(wireValue, { minLength: route.pathParams.length, maxLength: route.pathParams.length })
    .map((values) => route.pathParams.reduce((path, param, i) => path.replace(`{${param}}`, values[i]), route.path));
}

/** Header values as bytes (latin1 strings): anything but CR and LF, which would end the header. */
const headerValue: fc.Arbitrary<string> = fc.oneof(
  fc
    .uint8Array({ maxLength: 60 })
    .map((bytes) => Buffer.from(bytes.filter((b) => b !== 10 && b !== 13)).toString('latin1')),
  fc.string({ unit: 'binary', maxLength: 30 }).map((text) =>
    Buffer.from(text, 'utf8')
      .toString('latin1')
      .replace(/[\r\n]/g, ''),
  ),
  fc.constantFrom(
    '',
    '*',
    'W/"x"',
    '"',
    '\0',
    '\t',
    'Bearer',
    'Bearer ',
    'Bearer \0',
    `Bearer ${API_TOKEN}\0`,
    `Bearer ${API_TOKEN} x`,
    `Basic ${Buffer.from('a:b').toString('base64')}`,
    '-1',
    '99999999999999999999999',
    '1e400',
    'NaN',
  ),
  fc.integer({ min: 1025, max: 10_000 }).map((chars) => 'x'.repeat(chars)),
  numberText,
);

/** One request over its own socket, bytes exactly as given; the answer read until the server closes. */
function rawRequest(port: number, head: string, body = Buffer.alloc(0)): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(15_000, () =>
      socket.destroy(new Error(`no answer within 15 s to ${JSON.stringify(head.slice(0, 200))}`)),
    );
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (error) => (chunks.length > 0 ? undefined : reject(error)));
    socket.on('close', () => {
      if (chunks.length > 0) resolve(parseAnswer(Buffer.concat(chunks)));
      else reject(new Error(`connection closed without an answer to ${JSON.stringify(head.slice(0, 200))}`));
    });
    // Written, not ended: a half-closed socket may be dropped before the answer; `Connection: close` ends it.
    socket.write(Buffer.concat([Buffer.from(head, 'latin1'), body]));
  });
}

function parseAnswer(bytes: Buffer): RawAnswer {
  const text = bytes.toString('utf8');
  const end = text.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers = Object.fromEntries(
    lines.map((line) => {
      const colon = line.indexOf(':');
      return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
    }),
  );
  let body = text.slice(end + 4);
  if (headers['transfer-encoding'] === 'chunked') {
    let rest = body;
    body = '';
    for (;;) {
      const lineEnd = rest.indexOf('\r\n');
      const size = parseInt(rest.slice(0, lineEnd), 16);
      if (!(size > 0)) break;
      body += rest.slice(lineEnd + 2, lineEnd + 2 + size);
      rest = rest.slice(lineEnd + 4 + size);
    }
  }
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, body };
}

function requestHead(method: string, target: string, headers: Record<string, string>, bodyBytes?: number): string {
  const lines = [`${method} ${target} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close'];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  if (bodyBytes !== undefined) lines.push(`Content-Length: ${bodyBytes}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Never a 5XX; every refusal is problem+json whose status matches the answer's. */
function acceptable(answer: RawAnswer): boolean {
  if (answer.status < 200 || answer.status >= 500) return false;
  if (answer.status < 400) return true;
  if (!/^application\/problem\+json/.test(answer.headers['content-type'] ?? '')) return false;
  try {
    const body = JSON.parse(answer.body) as { status?: unknown; title?: unknown; detail?: unknown };
    return body.status === answer.status && typeof body.title === 'string' && typeof body.detail === 'string';
  } catch {
    return false;
  }
}

function check(answer: RawAnswer, head: string): void {
  if (!acceptable(answer)) {
    throw new Error(
      `${answer.status} ${answer.headers['content-type'] ?? ''} ${answer.body.slice(0, 300)}\nfor ${JSON.stringify(head.slice(0, 300))}`,
    );
  }
}

describe('arbitrary input never gets a 5XX (issue 11: hardening)', () => {
  let app: RunningDaemon;
  let port: number;
  let routes: Route[];
  let rowsBefore: Record<string, number>;
  const webhookBody = Buffer.from(JSON.stringify(webhookEvent()), 'utf8');

  /** Row counts of every table (pending OAuth requests aside: a valid /auth/connect legitimately starts one). */
  async function rowCounts(): Promise<Record<string, number>> {
    const client = new pg.Client({ connectionString: app.database.url });
    await client.connect();
    try {
      const tables = await client.query<{ name: string }>(
        `SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) AS name FROM pg_tables
          WHERE schemaname NOT IN ('pg_catalog', 'information_schema') AND tablename <> 'oauth_authorizations' ORDER BY 1`,
      );
      const counts: Record<string, number> = {};
      for (const { name } of tables.rows)
        counts[name] = Number((await client.query(`SELECT count(*) AS n FROM ${name}`)).rows[0].n);
      return counts;
    } finally {
      await client.end();
    }
  }

  const byPath = (path: string): Route => routes.find((route) => route.path === path)!;

  async function expectHealthy(): Promise<void> {
    expect(app.process.hasExited).toBe(false);
    const ready = await rawRequest(port, requestHead('GET', '/health/ready', {}));
    expect(ready.status).toBe(200);
  }

  beforeAll(async () => {
    // An upstream that is configured but never reached, so /auth/* get as far as checking their input.
    app = await startDaemon({
      UPSTREAM_AUTH_URL: 'http://127.0.0.1:9',
      UPSTREAM_BASE_URL: 'http://127.0.0.1:9',
      OAUTH_CLIENT_ID: 'fuzz-client',
      OAUTH_CLIENT_SECRET: 'fuzz-secret',
      LOG_LEVEL: 'info',
    });
    port = app.process.port;
    const document = (await (await fetch(`${app.url}/api/docs-json`)).json()) as {
      paths: Record<string, Record<string, { parameters?: Array<{ in: string; name: string }> }>>;
    };
    routes = Object.entries(document.paths).flatMap(([path, operations]) =>
      Object.entries(operations)
        .filter(([method]) => method === 'get')
        .map(([, operation]) => ({
          method: 'GET' as const,
          path,
          pathParams: (operation.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name),
          queryParams: (operation.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
        })),
    );
    // The callback's parameters are read from the whole query, so the document cannot list them.
    for (const route of routes) if (route.path === '/auth/callback') route.queryParams = ['code', 'state', 'error'];
    for (const route of routes) if (route.path === '/auth/connect') route.queryParams = ['api_token', 'redirect_uri'];
    rowsBefore = await rowCounts();
  }, 120_000);

  afterAll(async () => {
    await app?.close();
  });

  it('documents the routes the fuzzing covers', () => {
    const paths = routes.map((route) => route.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        '/api/v1/events',
        '/api/v1/events/{position}',
        '/api/v1/products',
        '/api/v1/products/{id}',
        '/api/v1/menu',
        '/auth/connect',
        '/auth/callback',
        '/api/v1/reconcile/runs',
      ]),
    );
  });

  it('answers arbitrary path and query values on every documented route with a 4XX problem or a normal answer', async () => {
    const request = fc
      .constantFrom(...routes)
      .chain((route) => fc.tuple(fc.constant(route), pathOf(route), queryOf(route)));
    await fc.assert(
      fc.asyncProperty(request, async ([route, path, query]) => {
        const head = requestHead(route.method, query === '' ? path : `${path}?${query}`, {
          Authorization: `Bearer ${API_TOKEN}`,
        });
        fc.pre(head.length <= MAX_REQUEST_BYTES);
        fc.pre(!longPolls(route.path, query));
        check(await rawRequest(port, head), head);
      }),
      {
        numRuns: 1200,
        // The two answers the outside check found as 500s come first, then generated ones.
        examples: [
          [[byPath('/api/v1/products/{id}'), '/api/v1/products/abc%00def', '']],
          [[byPath('/api/v1/products'), '/api/v1/products', 'owner_id=%00']],
        ],
      },
    );
    await expectHealthy();
  });

  it('answers arbitrary webhook keys (path garbage) without storing anything', async () => {
    const key = fc.oneof(
      wireValue,
      fc
        .constant(WEBHOOK_KEY)
        .chain((valid) => wireValue.filter((junk) => junk !== '').map((junk) => `${valid}${junk}`)),
    );
    await fc.assert(
      fc.asyncProperty(
        key,
        queryOf({ method: 'POST', path: '', pathParams: [], queryParams: ['key'] }),
        async (path, query) => {
          const target = `/webhooks/${path}${query === '' ? '' : `?${query}`}`;
          const head = requestHead('POST', target, { 'Content-Type': 'application/json' }, webhookBody.length);
          fc.pre(head.length + webhookBody.length <= MAX_REQUEST_BYTES);
          const answer = await rawRequest(port, head, webhookBody);
          check(answer, head);
          // Only the exact key stores; anything else is refused.
          if (answer.status < 300) throw new Error(`accepted a delivery at ${JSON.stringify(target.slice(0, 200))}`);
        },
      ),
      { numRuns: 300 },
    );
    await expectHealthy();
  });

  it('answers arbitrary If-None-Match, Last-Event-ID, X-Request-Id and Authorization headers', async () => {
    const headerRoutes = [
      '/api/v1/products',
      '/api/v1/events',
      '/api/v1/menu?owner_id=1',
      '/api/v1/products/1',
      '/auth/connect',
      '/auth/callback?code=c&state=s',
      '/health/ready',
      '/metrics',
    ];
    const headers = fc.record(
      {
        'If-None-Match': headerValue,
        'Last-Event-ID': headerValue,
        'X-Request-Id': headerValue,
        Authorization: fc.oneof(
          headerValue,
          headerValue.map((value) => `Bearer ${value}`),
        ),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...headerRoutes), headers, async (target, chosen) => {
        const head = requestHead('GET', target, chosen);
        fc.pre(head.length <= MAX_REQUEST_BYTES);
        check(await rawRequest(port, head), head);
      }),
      { numRuns: 600 },
    );
    await expectHealthy();
  });

  it('stored nothing and logged no server error', async () => {
    expect(await rowCounts()).toEqual(rowsBefore);
    expect(app.process.logs).not.toMatch(/"status":5\d\d/);
    await expectHealthy();
  });
});

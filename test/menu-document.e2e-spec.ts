import { CliResult, describeRun, runCli } from './support/cli.js';
import { eventually } from './support/eventually.js';
import { Answer, api, API_TOKEN, deliver, RunningDaemon, startDaemon } from './support/http.js';
import { at, collection, destroyedEvent, Json, menuEvent, product, trait, traitOption } from './support/menu-events.js';

/**
 * `/menu` streamed from PostgreSQL (issue 13): a menu of several hundred products (more than one
 * chunk of the stream) read as the expanded document of docs/reference.md §5 and as `?form=normalized`;
 * the ETag is the owner's menu version, kept by the projector, so it changes exactly when the
 * owner's content does — a projector page changing one of its rows, a delete, not a replay that
 * swaps an equal rebuilt schema in — and `If-None-Match` gives 304 without a body.
 */
const OWNER = 'doc-owner';
const PRODUCTS = 450;
const TRAITS = 60;

/** Products link 0–3 traits (repeats, unknown and deleted ones included); traits link 2–3 options. */
function menuEvents(): Json[] {
  const meta = (minutes: number, ownerId = OWNER) => ({ at: at(minutes), ownerId });
  const events: Json[] = [];
  for (let t = 0; t < TRAITS; t++) {
    const id = String(30000 + t);
    const optionIds = [
      String(31000 + 3 * t),
      String(31000 + 3 * t + 1),
      ...(t % 2 === 0 ? [String(31000 + 3 * t + 2)] : []),
      '39999',
    ];
    events.push(menuEvent('created', trait(id, { optionIds, title: `Trait ${t}` }), meta(1)));
    for (const optionId of optionIds.slice(0, -1))
      events.push(menuEvent('created', traitOption(optionId, { traitId: id }), meta(1)));
  }
  for (let p = 0; p < PRODUCTS; p++) {
    const traitIds = Array.from({ length: p % 4 }, (_, i) => String(30000 + ((p + 7 * i) % TRAITS)));
    if (p % 50 === 0) traitIds.push('38888', traitIds[0] ?? '30000');
    events.push(menuEvent('created', product(String(20000 + p), { traitIds, title: `Product ${p}` }), meta(1)));
  }
  for (let c = 0; c < 5; c++) {
    events.push(menuEvent('created', collection(String(40000 + c), { productIds: [String(20000 + c)] }), meta(1)));
  }
  events.push(
    destroyedEvent('trait', '30005', meta(2)),
    destroyedEvent('trait_option', '31001', meta(2)),
    destroyedEvent('product', '20003', meta(2)),
  );
  events.push(menuEvent('created', product('29999', { title: 'Elsewhere' }), meta(1, 'doc-other')));
  return events;
}

/** The normalized document re-joined into the expanded one: products → traits → trait options by the relationships' ids. */
function rejoin(normalized: Json): Json {
  const byId = (items: Json[]) => new Map(items.map((item) => [item.id, item]));
  const traits = byId(normalized.traits);
  const options = byId(normalized.trait_options);
  const linked = (resource: Json, name: string, from: Map<string, Json>) =>
    (resource.relationships[name]?.data ?? [])
      .map((link: Json) => from.get(String(link.id)))
      .filter((item: Json | undefined) => item);
  return {
    changes_cursor: normalized.changes_cursor,
    collections: normalized.collections,
    products: normalized.products.map((p: Json) => ({
      ...p,
      traits: linked(p, 'traits', traits).map((t: Json) => ({
        ...t,
        trait_options: linked(t, 'trait_options', options),
      })),
    })),
  };
}

describe('GET /api/v1/menu streamed, with the owner version as its ETag', () => {
  let app: RunningDaemon;
  const get = (path: string, headers: Record<string, string> = {}) => api(app.url, path, API_TOKEN, { headers });
  const menu = (query = '', headers: Record<string, string> = {}) =>
    get(`/api/v1/menu?owner_id=${OWNER}${query}`, headers);

  async function postAll(events: Json[]): Promise<void> {
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < events.length) {
          const event = events[next++];
          const answer = await deliver(app.url, event, { contentType: 'application/json' });
          if (answer.status !== 202) throw new Error(`delivery answered ${answer.status}: ${answer.text}`);
        }
      }),
    );
  }

  async function caughtUp(): Promise<void> {
    await eventually(async () => {
      const status = await get('/api/v1/projections');
      expect(status.json.data.map((p: Json) => p.lag)).toEqual(status.json.data.map(() => 0));
    });
  }

  /** The next menu once its ETag differs from `etag`. */
  async function changedFrom(etag: string): Promise<Answer> {
    return eventually(async () => {
      const answer = await menu('', { 'if-none-match': etag });
      expect(answer.status).toBe(200);
      return answer;
    });
  }

  beforeAll(async () => {
    app = await startDaemon();
    await postAll(menuEvents());
    await caughtUp();
  }, 120000);

  afterAll(async () => {
    await app?.close();
  });

  it('expanded (the default): every live collection and product, each as the item reads give it, in id order', async () => {
    const answer = await menu();
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    const document = answer.json;
    expect(Object.keys(document)).toEqual(['collections', 'products', 'changes_cursor']);
    expect(document.changes_cursor).toEqual(answer.headers.get('x-changes-cursor'));
    expect(document.products.map((p: Json) => p.id)).toEqual(
      Array.from({ length: PRODUCTS }, (_, p) => String(20000 + p)).filter((id) => id !== '20003'),
    );
    expect(document.collections).toEqual((await get(`/api/v1/collections?owner_id=${OWNER}`)).json.data);
    // The old expansion (products/{id}?expand=traits, built in the process) gives the same content for each product.
    for (const expanded of document.products) {
      expect(expanded).toEqual((await get(`/api/v1/products/${expanded.id}?expand=traits`)).json);
    }
    const repeated = document.products.find((p: Json) => p.id === '20050');
    expect(repeated.traits.map((t: Json) => t.id)).toEqual(['30050', '30057', '30050']);
    expect(document.products.some((p: Json) => p.traits.some((t: Json) => t.id === '30005'))).toBe(false);
    expect((await menu('&form=expanded')).json).toEqual(document);
  });

  it('normalized: products, traits and trait options each listed once; re-joined it is the expanded document', async () => {
    const expanded = (await menu()).json;
    const answer = await menu('&form=normalized');
    expect(answer.status).toBe(200);
    const normalized = answer.json;
    expect(Object.keys(normalized)).toEqual(['collections', 'products', 'traits', 'trait_options', 'changes_cursor']);
    expect(normalized.products.every((p: Json) => !('traits' in p))).toBe(true);
    for (const list of ['traits', 'trait_options']) {
      const listed = normalized[list].map((item: Json) => item.id);
      expect(new Set(listed).size).toBe(listed.length);
      expect(normalized[list].every((item: Json) => item.deleted === false)).toBe(true);
    }
    expect(normalized.traits.map((t: Json) => t.id)).not.toContain('30005');
    expect(rejoin(normalized)).toEqual(expanded);
    expect(answer.headers.get('etag')).not.toBe((await menu()).headers.get('etag'));
    expect((await menu('&form=sideways')).status).toBe(400);
  });

  it('as_of streams both forms too, and they agree', async () => {
    const asOf = `&as_of=${encodeURIComponent(at(1))}`;
    const expanded = (await menu(asOf)).json;
    expect(expanded.products).toHaveLength(PRODUCTS);
    expect(expanded.products.find((p: Json) => p.id === '20005').traits.map((t: Json) => t.id)).toEqual(['30005']);
    expect(rejoin((await menu(`${asOf}&form=normalized`)).json)).toEqual(expanded);
    const latest = `&as_of=${encodeURIComponent(at(60))}`;
    // Equal but for the cursor: a live document has one, an as_of document none (docs/reference.md §11).
    const content = (document: Json) => ({ ...document, changes_cursor: undefined });
    expect((await menu(latest)).json.changes_cursor).toBeNull();
    expect(content((await menu(latest)).json)).toEqual(content((await menu()).json));
    expect(content((await menu(`${latest}&form=normalized`)).json)).toEqual(
      content((await menu('&form=normalized')).json),
    );
  });

  it("If-None-Match with the ETag → 304 without a body; the ETag changes exactly when the owner's content does", async () => {
    const first = await menu();
    const etag = first.headers.get('etag')!;
    // Read again unchanged (kept since the first read): the same document, byte for byte, and cursor.
    const again = await menu();
    expect(again.text).toBe(first.text);
    expect(again.headers.get('etag')).toBe(etag);
    expect(again.headers.get('x-changes-cursor')).toBe(first.headers.get('x-changes-cursor'));
    expect(etag).toMatch(/^"menu-\d+-e"$/);
    const notModified = await menu('', { 'if-none-match': etag });
    expect(notModified.status).toBe(304);
    expect(notModified.text).toBe('');
    expect(notModified.headers.get('etag')).toBe(etag);
    expect((await menu('', { 'if-none-match': `"x", ${etag}` })).status).toBe(304);

    // Nothing of this owner changes: another owner's product, an older update of one of its own.
    await postAll([
      menuEvent('updated', product('29999', { title: 'Elsewhere, renamed' }), { at: at(3), ownerId: 'doc-other' }),
      menuEvent('updated', product('20010', { title: 'older than its create' }), { at: at(0), ownerId: OWNER }),
    ]);
    await caughtUp();
    expect((await menu('', { 'if-none-match': etag })).status).toBe(304);

    // A projector page that changes one of its products.
    await postAll([menuEvent('updated', product('20010', { title: 'Renamed' }), { at: at(3), ownerId: OWNER })]);
    const renamed = await changedFrom(etag);
    expect(renamed.json.products.find((p: Json) => p.id === '20010').attributes.title).toBe('Renamed');
    const etag2 = renamed.headers.get('etag')!;
    expect(etag2).not.toBe(etag);
    expect((await menu('', { 'if-none-match': etag2 })).status).toBe(304);

    // A delete: a trait option, which the expanded products show.
    await postAll([destroyedEvent('trait_option', '31000', { at: at(4), ownerId: OWNER })]);
    const withoutOption = await changedFrom(etag2);
    expect(
      renamed.json.products.find((p: Json) => p.id === '20000').traits[0].trait_options.map((o: Json) => o.id),
    ).toEqual(['31000', '31002']);
    expect(
      withoutOption.json.products.find((p: Json) => p.id === '20000').traits[0].trait_options.map((o: Json) => o.id),
    ).toEqual(['31002']);
    const etag3 = withoutOption.headers.get('etag')!;

    // A replay swaps a rebuilt schema in with the same content: the ETag stays (it changes exactly
    // when the content does), so the old one still gives 304.
    const replay: CliResult = await runCli(
      ['replay', '--projection', 'menu'],
      {
        DATABASE_URL: app.database.url,
        TOKEN_ENCRYPTION_KEY: app.process.env.TOKEN_ENCRYPTION_KEY!,
        LOG_LEVEL: 'info',
      },
      app.process.cwd,
      120000,
    );
    expect({ code: replay.code, run: describeRun(replay) }).toMatchObject({ code: 0 });
    expect((await menu('', { 'if-none-match': etag3 })).status).toBe(304);
    const afterReplay = await menu();
    expect(afterReplay.headers.get('etag')).toBe(etag3);
    expect(afterReplay.json).toEqual(withoutOption.json);
    // The rebuilt schema keeps versions: the next change moves the ETag again.
    await postAll([destroyedEvent('product', '20011', { at: at(5), ownerId: OWNER })]);
    const deleted = await changedFrom(afterReplay.headers.get('etag')!);
    expect(deleted.json.products.map((p: Json) => p.id)).not.toContain('20011');
  }, 180000);
});

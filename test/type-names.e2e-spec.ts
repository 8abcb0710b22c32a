import { DaemonProcess } from './support/daemon-process.js';
import { api, LOOPBACK_NETWORKS, RunningDaemon, sendJson, startDaemon } from './support/http.js';

/**
 * Resource types are named in one form, the singular (`product`), wherever a type is chosen: a
 * sink's `types`, the feed's `type`, CHANGES_TYPES (docs/reference.md §11). A plural (the API's
 * collection name, a table sink's table) is refused with a problem that names the singular.
 */
describe('resource types are named in the singular (issue 41)', () => {
  let app: RunningDaemon;

  beforeAll(async () => {
    app = await startDaemon({ SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS });
  });

  afterAll(async () => {
    await DaemonProcess.killAll();
    await app?.close();
  });

  const problem = (status: number, field: string, detail: string) => ({
    type: 'urn:menu-sync:problem:bad-request',
    title: 'Bad Request',
    status,
    field,
    detail,
  });

  it('POST /api/v1/sinks: a plural in types is a 400 naming the singular, and nothing is created', async () => {
    const url = 'http://127.0.0.1:1/hook';
    for (const [types, detail] of [
      [['products'], 'types: products is a collection name; the type is product'],
      [
        ['product', 'collections', 'trait_options'],
        'types: collections, trait_options are collection names; the types are collection, trait_option',
      ],
      [
        ['order_product_trait_options'],
        'types: order_product_trait_options is a collection name; the type is order_product_trait_option',
      ],
      [
        ['product', 'menu_item'],
        'types: menu_item is not a resource type (collection, product, trait, trait_option, order, order_product, order_product_trait_option, store)',
      ],
    ] as const) {
      const answer = await sendJson(app, 'POST', '/api/v1/sinks', { kind: 'http', url, types });
      expect({ status: answer.status, type: answer.headers.get('content-type'), body: answer.json }).toEqual({
        status: 400,
        type: expect.stringMatching(/^application\/problem\+json/),
        body: problem(400, 'types', detail),
      });
    }
    expect((await api(app.url, '/api/v1/sinks')).json.data).toEqual([]);
  });

  it('PATCH /api/v1/sinks/{id}: a plural in types is a 400 naming the singular; the singular is taken', async () => {
    const created = await sendJson(app, 'POST', '/api/v1/sinks', {
      kind: 'http',
      url: 'http://127.0.0.1:1/hook',
      types: ['product', 'collection'],
      from: 'now',
    });
    expect([created.status, created.json.data.types]).toEqual([201, ['product', 'collection']]);
    const id = created.json.data.id;
    const refused = await sendJson(app, 'PATCH', `/api/v1/sinks/${id}`, { types: ['stores'] });
    expect([refused.status, refused.json]).toEqual([
      400,
      problem(400, 'types', 'types: stores is a collection name; the type is store'),
    ]);
    expect((await api(app.url, `/api/v1/sinks/${id}`)).json.data.types).toEqual(['product', 'collection']);
    const changed = await sendJson(app, 'PATCH', `/api/v1/sinks/${id}`, { types: ['store'] });
    expect([changed.status, changed.json.data.types]).toEqual([200, ['store']]);
  });

  it('GET /api/v1/changes?type=: a plural is a 400 naming the singular; singulars filter', async () => {
    const refused = await api(app.url, '/api/v1/changes?type=product,collections');
    expect([refused.status, refused.json]).toEqual([
      400,
      problem(400, 'type', 'type: collections is a collection name; the type is collection'),
    ]);
    const taken = await api(app.url, '/api/v1/changes?type=product,collection');
    expect([taken.status, taken.json.data]).toEqual([200, []]);
  });

  it('CHANGES_TYPES: a plural stops the start with exit code 2, naming the variable and the singular', async () => {
    const daemon = await DaemonProcess.spawn({
      cwd: app.process.cwd,
      env: { ...app.process.env, PORT: '0', CHANGES_TYPES: 'product,collections' },
    });
    const exit = await daemon.waitForExit(30_000);
    expect({ exit, stderr: daemon.stderr }).toEqual({
      exit: { code: 2, signal: null },
      stderr:
        'menu-sync: Invalid configuration:\n  - CHANGES_TYPES: collections is a collection name; the type is collection\n',
    });
  });
});

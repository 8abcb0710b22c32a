import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DaemonProcess, expectCleanStop, stopLeftovers } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';

/**
 * The zero-config sandbox (issue 7, docs/reference.md §1): the built daemon with an empty environment in a
 * fresh directory runs an embedded PostgreSQL and the emulator in-process, connects to it through
 * the real OAuth flow, and the first reconcile imports the demo menu; a product made through the
 * emulator's control API is delivered into the mirror; SIGTERM leaves no PostgreSQL behind. A
 * restart on the same data gets a fresh emulator: the old connection is retired, a new one made.
 */

/** The first start runs initdb. */
const FIRST_READY_MS = 90_000;
const DEMO_OWNER = '4001';

type Json = any;

/** A GET or a JSON request; loopback clients need no token while API_TOKENS is unset. */
async function call(url: string, init: RequestInit = {}): Promise<{ status: number; json: Json }> {
  const response = await fetch(url, init);
  const text = await response.text();
  return { status: response.status, json: text === '' ? undefined : JSON.parse(text) };
}

async function connections(daemon: DaemonProcess): Promise<Json[]> {
  const answer = await call(`${daemon.url}/api/v1/connections`);
  expect(answer.status).toBe(200);
  return answer.json.data;
}

async function demoProducts(daemon: DaemonProcess): Promise<Json[]> {
  const answer = await call(`${daemon.url}/api/v1/products?owner_id=${DEMO_OWNER}&limit=1000`);
  expect(answer.status).toBe(200);
  return answer.json.data;
}

describe('`npm start` with an empty environment: the sandbox', () => {
  let dir: string;
  let firstEmulator: string;
  let demoTitles: string[];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-sandbox-'));
    // Run as root, the embedded PostgreSQL runs as `postgres`, which must traverse this directory.
    await chmod(dir, 0o755);
  });

  afterAll(async () => {
    await DaemonProcess.killAll('SIGKILL');
    if (dir === undefined) return;
    await stopLeftovers(dir);
    await rm(dir, { recursive: true, force: true });
  });

  it(
    'shows the demo menu, then a product made through the emulator, and stops its PostgreSQL on SIGTERM',
    async () => {
      const daemon = await DaemonProcess.start({ cwd: dir, env: {}, readyTimeoutMs: FIRST_READY_MS });
      // PORT is the helper's free port; nothing else is configured.
      expect(Object.keys(daemon.env).sort()).toEqual(['HOME', 'PATH', 'PORT']);

      // The connection is stored before its webhook endpoint is registered: wait for both.
      const [connection] = await eventually(
        async () => {
          const listed = await connections(daemon);
          expect(listed).toEqual([
            expect.objectContaining({
              id: 1,
              state: 'active',
              mode: 'emulator',
              owner_id: DEMO_OWNER,
              subscriptions: [expect.objectContaining({ status: 'registered' })],
            }),
          ]);
          return listed;
        },
        30_000,
        200,
      );
      firstEmulator = connection.base_url;
      expect(firstEmulator).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(daemon.logs).toMatch(/embedded PostgreSQL/);
      expect(daemon.logs).toContain(`sandbox: the built-in emulator at ${firstEmulator} is the upstream`);
      // How to make changes: through the emulator's control API (logged once the sandbox sees the
      // connection, which may be a moment after the API lists it).
      await eventually(async () => expect(daemon.logs).toContain(`${firstEmulator}/_emulator/products`), 10_000, 100);

      const products = await eventually(
        async () => {
          const listed = await demoProducts(daemon);
          expect(listed).toHaveLength(30);
          return listed;
        },
        30_000,
        200,
      );
      demoTitles = products.map((item) => item.attributes.title).sort();
      const menu = await call(`${daemon.url}/api/v1/menu?owner_id=${DEMO_OWNER}`);
      expect(menu.json.collections).toHaveLength(4);
      const [run] = (await call(`${daemon.url}/api/v1/reconcile/runs`)).json.data;
      expect(run).toMatchObject({
        trigger: 'connection',
        outcome: 'ok',
        stores: [expect.objectContaining({ store_id: '1', events_appended: 60 })],
      });

      const created = await call(`${firstEmulator}/_emulator/products`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ attributes: { title: 'Soup of the day', base_cost: { GBP: 650 } } }),
      });
      expect(created.status).toBe(201);
      const shown = await eventually(
        async () => {
          const answer = await call(`${daemon.url}/api/v1/products/${created.json.id}`);
          expect(answer.status).toBe(200);
          return answer.json;
        },
        15_000,
        100,
      );
      expect(shown).toMatchObject({ owner_id: DEMO_OWNER, attributes: { title: 'Soup of the day' }, deleted: false });
      // The catalogue mirror (reference §11): the sandbox's own http sink keeps a catalogue file, named in the log.
      const catalogueFile = path.join(dir, 'data', 'catalogue.json');
      expect(daemon.logs).toContain(catalogueFile);
      const catalogue = await eventually(
        async () => {
          const parsed = JSON.parse(await readFile(catalogueFile, 'utf8'));
          expect(parsed.product.map((product: Json) => product.id)).toContain(created.json.id);
          return parsed;
        },
        15_000,
        100,
      );
      expect(catalogue.product.find((product: Json) => product.id === created.json.id)).toEqual(shown);
      expect(catalogue.product).toHaveLength(31);
      expect(catalogue.collection).toHaveLength(4);
      const delivered = (await call(`${daemon.url}/api/v1/events?subject_type=product&subject_id=${created.json.id}`))
        .json.data;
      expect(delivered.map((event: Json) => [event.event_type, event.source])).toEqual([
        ['product.created', 'webhook'],
      ]);

      await expectCleanStop(daemon, dir);
      // The emulator went with it.
      await expect(fetch(`${firstEmulator}/_emulator/state`)).rejects.toThrow();
    },
    FIRST_READY_MS + 45_000,
  );

  it('on a restart, retires the connection to the old emulator, connects the new one, and still shows the demo menu', async () => {
    expect(firstEmulator).toBeDefined();
    const daemon = await DaemonProcess.start({ cwd: dir, env: {} });
    const listed = await eventually(
      async () => {
        const all = await connections(daemon);
        expect(all.map((connection) => [connection.id, connection.state])).toEqual([
          [1, 'reauthorization_required'],
          [2, 'active'],
        ]);
        return all;
      },
      30_000,
      200,
    );
    expect(listed[0].base_url).toBe(firstEmulator);
    expect(listed[1].base_url).not.toBe(firstEmulator);
    expect(daemon.logs).toContain(`sandbox: the built-in emulator at ${listed[1].base_url} is the upstream`);

    // The new emulator's first reconcile: its demo menu, without the product the old one had made.
    const run = await eventually(
      async () => {
        const [newest] = (await call(`${daemon.url}/api/v1/reconcile/runs`)).json.data;
        expect(newest).toMatchObject({
          trigger: 'connection',
          stores: [expect.objectContaining({ connection_id: 2 })],
        });
        return newest;
      },
      30_000,
      200,
    );
    expect(run).toMatchObject({
      outcome: 'ok',
      stores: [expect.objectContaining({ differences: expect.objectContaining({ destroyed: { product: 1 } }) })],
    });
    const products = await eventually(
      async () => {
        const all = await demoProducts(daemon);
        expect(all).toHaveLength(30);
        return all;
      },
      15_000,
      200,
    );
    expect(products.map((item) => item.attributes.title).sort()).toEqual(demoTitles);

    await expectCleanStop(daemon, dir);
  }, 90_000);
});

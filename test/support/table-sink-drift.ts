import { runCli } from './cli.js';
import { DaemonProcess } from './daemon-process.js';
import { eventually } from './eventually.js';
import { api, deliver, LOOPBACK_NETWORKS, startDaemon } from './http.js';
import { createMysqlTarget } from './mariadb.js';
import { createPostgresTarget } from './postgres-target.js';
import { at, menuEvent, product } from './menu-events.js';
import { expectRelationalMatches } from './relational-tables.js';
import { settledSink } from './sink-receiver.js';
import { apiResources, postJson, TableReader, TableSinkWorld } from './table-sink-scenarios.js';
import { expectRowMatches } from './table-sinks.js';

type Json = any;

/**
 * What the e2e tests of tables changed by hand share (docs/reference.md §12): sinks into both
 * targets, products delivered, the products table compared with the API, attempts, `sinks verify`.
 * `current` answers the world of the running test file (set in its beforeAll).
 */
export function driftHelpers(current: () => TableSinkWorld) {
  /** A postgres sink in schema `name` and a mysql sink with prefix `name_`, following the products of `owner`. */
  async function createSinks(
    owner: string,
    name: string,
    types = ['product'],
    layout = 'document',
  ): Promise<[string, string]> {
    const common = { owner_ids: [owner], types, layout };
    const pg = await postJson(current().app, '/api/v1/sinks', {
      kind: 'postgres',
      url: current().pgTarget.url,
      schema: name,
      ...common,
    });
    const my = await postJson(current().app, '/api/v1/sinks', {
      kind: 'mysql',
      url: current().myTarget.url,
      table_prefix: `${name}_`,
      ...common,
    });
    expect([pg.status, my.status]).toEqual([201, 201]);
    return [pg.json.data.id, my.json.data.id];
  }

  async function deliverProducts(owner: string, ids: number[], title: (id: number) => string): Promise<void> {
    for (const id of ids) {
      const event = menuEvent('created', product(String(id), { title: title(id) }), { at: at(id), ownerId: owner });
      expect([200, 202]).toContain((await deliver(current().app.url, event)).status);
    }
  }

  /** Waits until the sink has delivered everything, then compares its products table with the API. */
  async function expectProductsEqualToApi(
    sinkId: string,
    owner: string,
    reader: TableReader,
    layout = 'document',
  ): Promise<void> {
    await eventually(
      async () => {
        const projections = (await api(current().app.url, '/api/v1/projections')).json.data as Json[];
        expect(projections.every((projection) => projection.lag === 0)).toBe(true);
        await settledSink(current().app.url, sinkId, { lag: 0, state: 'active', last_error: null }, 1000);
        const expected = await apiResources(current().app, owner, 'product');
        if (layout === 'relational')
          return expectRelationalMatches((table) => reader.rows(table), 'product', owner, expected);
        const columns = await reader.columns('products');
        const rows = (await reader.rows('products')).filter((row) => row.owner_id === owner);
        expect(rows.map((row) => String(row.id)).sort()).toEqual(expected.map((resource) => resource.id).sort());
        const byId = new Map(rows.map((row) => [String(row.id), row]));
        for (const resource of expected) expectRowMatches(byId.get(resource.id), resource, columns);
      },
      60_000,
      200,
    );
  }

  const attempts = async (sinkId: string): Promise<Json[]> =>
    (await api(current().app.url, `/api/v1/sinks/${sinkId}/attempts?limit=1000`)).json.data;

  const verify = async (args: string[]) => {
    const result = await runCli(
      ['sinks', 'verify', ...args],
      { ...current().app.process.env, LOG_LEVEL: 'warn' },
      undefined,
      60_000,
    );
    for (const password of [current().pgTarget.password, current().myTarget.password])
      for (const text of [result.stdout, result.stderr]) {
        expect(text).not.toContain(password);
        expect(text).not.toContain(encodeURIComponent(password));
      }
    return result;
  };

  return { createSinks, deliverProducts, expectProductsEqualToApi, attempts, verify };
}

/**
 * A PostgreSQL and a MySQL target and a daemon whose sinks may reach loopback (failing after 2 s),
 * made before the calling file's tests and dropped after them, with `driftHelpers` on them. Read
 * `world`'s fields inside hooks and tests, not when declaring.
 */
export function useDriftWorld(): { world: TableSinkWorld } & ReturnType<typeof driftHelpers> {
  const world = {} as TableSinkWorld;
  beforeAll(async () => {
    [world.pgTarget, world.myTarget] = await Promise.all([createPostgresTarget(), createMysqlTarget()]);
    world.app = await startDaemon({ SINK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS, SINK_FAILING_AFTER: '2s' });
  });
  afterAll(async () => {
    await DaemonProcess.killAll();
    await world.app?.close();
    await world.pgTarget?.drop();
    await world.myTarget?.drop();
  });
  return { world, ...driftHelpers(() => world) };
}

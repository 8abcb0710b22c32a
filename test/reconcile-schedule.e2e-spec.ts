import type { RunningEmulator } from '../src/emulator/emulator.factory.js';
import { bootEmulator, call, control } from './emulator/emulator-client.js';
import { connect, startDaemonOn } from './support/connect.js';
import { eventually } from './support/eventually.js';
import { api, RunningDaemon, scrape } from './support/http.js';
import type { Json } from './support/menu-events.js';

/**
 * Reconcile on RECONCILE_CRON (docs/reference.md §1, §8), against an emulator whose snapshot documents are
 * paginated (7 per page): the scheduled runs follow `links.next` through every page, heal a change
 * whose deliveries all failed, count what they did in /metrics, and no run starts while one is going.
 */
describe('reconcile on its schedule, over paginated snapshots', () => {
  let emulator: RunningEmulator;
  let daemon: RunningDaemon;

  const runs = async (): Promise<Json[]> => (await api(daemon.url, '/api/v1/reconcile/runs?limit=100')).json.data;

  beforeAll(async () => {
    emulator = await bootEmulator({ demoData: true, pageSize: 7, retryScheduleMs: [10, 10, 10, 10, 10] });
    daemon = await startDaemonOn(emulator, { STORE_IDS: '1', RECONCILE_CRON: '*/2 * * * * *' });
    await connect(daemon.url);
  }, 120_000);

  afterAll(async () => {
    await daemon?.close();
    await emulator?.close();
  });

  it('imports every page of the demo menu, then scheduled runs find nothing to do', async () => {
    // Runs before the connection had nothing to do. The first run that saw the connection imported
    // the menu: usually the connection's own, but a scheduled run (every 2 s) may start first, and
    // then the connection's run finds nothing left. Every run after the first appends nothing.
    const connected = await eventually(
      async () => {
        const run = (await runs()).find((candidate) => candidate.trigger === 'connection');
        expect(run).toMatchObject({ outcome: 'ok' });
        return run;
      },
      10_000,
      100,
    );
    const withStores = (await runs()).filter((run) => run.stores.length > 0).sort((a, b) => a.id - b.id);
    const [first, ...rest] = withStores;
    expect(first.id).toBeLessThanOrEqual(connected.id);
    expect(first.stores[0]).toMatchObject({
      checked: { collection: 4, product: 30, trait: 6, trait_option: 20, order: 0 },
      events_appended: 60,
    });
    const later = async () => (await runs()).filter((run) => run.trigger === 'schedule' && run.id > connected.id);
    await eventually(async () => expect((await later()).length).toBeGreaterThan(0), 10_000, 200);
    for (const run of [...rest, ...(await later())]) {
      expect(run).toMatchObject({ outcome: 'ok', stores: [expect.objectContaining({ events_appended: 0 })] });
    }
    for (const run of (await runs()).filter((candidate) => candidate.id < first.id)) {
      expect(run).toMatchObject({
        trigger: 'schedule',
        outcome: 'ok',
        stores: [],
        notes: ['no connection yet: nothing to reconcile'],
      });
    }
    const products = await api(daemon.url, '/api/v1/products?limit=1000&owner_id=4001');
    expect(products.json.data).toHaveLength(30);
  });

  it('heals a change whose deliveries all failed at the next scheduled run, and counts it in /metrics', async () => {
    const before = (await runs()).length;
    expect((await control(emulator, 'POST', '/_emulator/faults', { fail_first_attempts: 6 })).status).toBe(200);
    const created = (
      await control(emulator, 'POST', '/_emulator/products', {
        attributes: { title: 'Made during an outage', base_cost: { GBP: 500 } },
      })
    ).json.id;
    await eventually(
      async () => expect((await call(emulator, '/_emulator/deliveries')).json.pending).toBe(0),
      10_000,
      50,
    );
    await control(emulator, 'POST', '/_emulator/faults', {});

    await eventually(
      async () => expect((await api(daemon.url, `/api/v1/products/${created}`)).status).toBe(200),
      10_000,
      200,
    );
    // No delivery got through: the product reached the mirror through reconcile alone.
    const logged = (await api(daemon.url, `/api/v1/events?subject_type=product&subject_id=${created}`)).json.data;
    expect(logged.map((entry: Json) => [entry.event_type, entry.source])).toEqual([['product.created', 'reconcile']]);
    const healing = (await runs()).find((run) => run.trigger === 'schedule' && run.stores[0]?.events_appended > 0);
    expect(healing.stores[0]).toMatchObject({ differences: { created: { product: 1 } }, events_appended: 1 });
    expect((await runs()).length).toBeGreaterThan(before);
    expect(
      await scrape(daemon.url, 'menu_sync_reconcile_differences_total', { type: 'product', kind: 'created' }),
    ).toBe(31);
    expect(await scrape(daemon.url, 'menu_sync_reconcile_runs_total', { outcome: 'ok' })).toBeGreaterThanOrEqual(3);
    expect(await scrape(daemon.url, 'menu_sync_upstream_requests_total', { status: '200' })).toBeGreaterThan(0);
  });

  it('answers a malformed limit with 400 naming it, never a silent clamp', async () => {
    for (const limit of ['abc', '1abc', '0', '101', '-1', '1e2', '']) {
      const answer = await api(daemon.url, `/api/v1/reconcile/runs?limit=${limit}`);
      expect({ limit, status: answer.status, field: answer.json.field }).toEqual({
        limit,
        status: 400,
        field: 'limit',
      });
    }
    expect((await api(daemon.url, '/api/v1/reconcile/runs?limit=1')).json.data).toHaveLength(1);
  });

  it('never overlaps two runs', async () => {
    const spans = (await runs())
      .map((run) => [Date.parse(run.started_at), Date.parse(run.finished_at)])
      .sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < spans.length; i++) expect(spans[i][0]).toBeGreaterThanOrEqual(spans[i - 1][1]);
  });
});

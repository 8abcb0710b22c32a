import { Test } from '@nestjs/testing';
import { Registry } from 'prom-client';
import { loadConfig } from '../config/app-config.js';
import { ConfigModule } from '../config/config.module.js';
import { MetricsService } from './metrics.service.js';
import { SinkSeries } from './sink-series.js';

const KINDS = ['http', 'nats', 'postgres', 'mysql'];
const sinkId = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const sinkOf = (n: number) => ({ id: sinkId(n), kind: KINDS[n % KINDS.length] });

/** The value of each series of `name` in an exposition, by its labels as written. */
function series(exposition: string, name: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const match of exposition.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm')))
    found.set(match[1], Number(match[2]));
  return found;
}

const sinksOf = (exposition: string, name: string) =>
  [...series(exposition, name).keys()].map((labels) => /sink="([^"]+)"/.exec(labels)![1]);

/** A clock the test moves: a choice of sinks stands for a second. */
function clock() {
  let now = 0;
  return { now: () => now, pass: (ms: number) => (now += ms) };
}

/** `count` sinks leased and reported by their workers: sink n lags n changes, delivered once. */
function report(sinks: SinkSeries, count: number): void {
  sinks.leased(Array.from({ length: count }, (_, n) => sinkId(n)));
  for (let n = 0; n < count; n++) {
    const sink = sinkOf(n);
    sinks.lag(sink, n);
    sinks.observeSeconds(sink, 0.01 + (n % 7) / 10);
    sinks.delivered(sink, 'ok');
  }
}

describe('SinkSeries (docs/reference.md §11)', () => {
  it('answers /metrics for 10,000 sinks in under 200 kB, with series by sink for exactly the 20 most lagging', async () => {
    const metrics = new MetricsService(loadConfig({}));
    report(metrics.sinks, 10_000);
    for (let n = 0; n < 10_000; n += 1000) metrics.sinks.egressRefused(sinkOf(n));

    await metrics.registry.metrics();
    // chosen at that scrape, the 20 are timed from now on
    report(metrics.sinks, 10_000);
    const exposition = await metrics.registry.metrics();

    expect(Buffer.byteLength(exposition)).toBeLessThan(200_000);
    const mostLagging = Array.from({ length: 20 }, (_, i) => sinkId(9999 - i)).sort();
    expect(sinksOf(exposition, 'menu_sync_sink_lag_changes').sort()).toEqual(mostLagging);
    expect(series(exposition, 'menu_sync_sink_lag_changes').get(`sink="${sinkId(9999)}"`)).toBe(9999);
    expect(new Set(sinksOf(exposition, 'menu_sync_sink_deliveries_total'))).toEqual(new Set(mostLagging));
    expect(series(exposition, 'menu_sync_sink_deliveries_total').size).toBe(20 * 3);
    expect(sinksOf(exposition, 'menu_sync_sink_leased').sort()).toEqual(mostLagging);
    expect(sinksOf(exposition, 'menu_sync_sink_delivery_seconds_count').sort()).toEqual(mostLagging);
    expect(series(exposition, 'menu_sync_sink_delivery_seconds_bucket').size).toBe(20 * 13);
    expect(sinksOf(exposition, 'menu_sync_sink_egress_refused_total')).toEqual([]);
    expect(series(exposition, 'menu_sync_sinks_leased').get('')).toBeUndefined();
    expect(exposition).toContain('menu_sync_sinks_leased 10000\n');
    expect(series(exposition, 'menu_sync_sinks_deliveries_total').get('kind="http",outcome="ok"')).toBe(5000);
    expect(series(exposition, 'menu_sync_sinks_delivery_seconds_count').get('kind="mysql"')).toBe(5000);
    expect(series(exposition, 'menu_sync_sinks_egress_refused_total').get('kind="http"')).toBe(10);
    // sink n lags n: the http sinks are 0, 4, …, 9996
    const lag = series(exposition, 'menu_sync_sinks_lag_changes');
    expect(lag.get('kind="http",quantile="0.5"')).toBe(4996);
    expect(lag.get('kind="http",quantile="0.99"')).toBe(9896);
    expect(lag.get('kind="http",quantile="1"')).toBe(9996);
    expect(series(exposition, 'menu_sync_sinks_backlog_changes').get('kind="nats"')).toBe(
      Array.from({ length: 2500 }, (_, i) => 4 * i + 1).reduce((a, b) => a + b, 0),
    );
  });

  it('chooses the failing sinks first, then the most lagging, and removes the series of a sink no longer chosen', async () => {
    const registry = new Registry();
    const time = clock();
    const sinks = new SinkSeries(registry, 3, time.now);
    report(sinks, 10);
    for (const n of [2, 5]) sinks.delivered(sinkOf(n), 'retry');

    let exposition = await registry.metrics();
    expect(sinksOf(exposition, 'menu_sync_sink_lag_changes').sort()).toEqual([2, 5, 9].map(sinkId));
    expect(sinksOf(exposition, 'menu_sync_sink_delivery_seconds_count')).toEqual([]);
    for (const n of [2, 5, 9]) sinks.observeSeconds(sinkOf(n), 0.2);
    exposition = await registry.metrics();
    expect(series(exposition, 'menu_sync_sink_deliveries_total').get(`sink="${sinkId(5)}",outcome="retry"`)).toBe(1);
    expect(series(exposition, 'menu_sync_sink_delivery_seconds_count').get(`sink="${sinkId(9)}"`)).toBe(1);

    sinks.delivered(sinkOf(5), 'ok');
    sinks.lag(sinkOf(5), 0);
    sinks.lag(sinkOf(7), 100);
    time.pass(1000);
    exposition = await registry.metrics();
    expect(sinksOf(exposition, 'menu_sync_sink_lag_changes').sort()).toEqual([2, 7, 9].map(sinkId));
    expect(sinksOf(exposition, 'menu_sync_sink_delivery_seconds_count').sort()).toEqual([2, 9].map(sinkId));
    expect(exposition).not.toContain(sinkId(5));
    // still counted by kind: sink 5 is a nats sink
    expect(series(exposition, 'menu_sync_sinks_deliveries_total').get('kind="nats",outcome="retry"')).toBe(1);
  });

  it('shows every sink while there are no more than METRICS_SINK_SERIES, a sink handed on without its lag, none with 0', async () => {
    const registry = new Registry();
    const sinks = new SinkSeries(registry, 20);
    report(sinks, 3);
    sinks.forget(sinkId(1));
    sinks.leased([sinkId(0), sinkId(2)]);
    const exposition = await registry.metrics();
    expect(sinksOf(exposition, 'menu_sync_sink_deliveries_total').sort()).toEqual(
      [0, 0, 0, 1, 1, 1, 2, 2, 2].map(sinkId),
    );
    expect(sinksOf(exposition, 'menu_sync_sink_lag_changes').sort()).toEqual([0, 2].map(sinkId));
    expect(sinksOf(exposition, 'menu_sync_sink_leased').sort()).toEqual([0, 2].map(sinkId));

    const none = new Registry();
    report(new SinkSeries(none, 0), 3);
    expect(await none.metrics()).not.toMatch(/sink="/);
  });

  it('counts the sinks of the database by kind and state, every combination shown', async () => {
    const registry = new Registry();
    const sinks = new SinkSeries(registry, 20);
    sinks.count([
      { kind: 'http', state: 'failing', n: 2 },
      { kind: 'mysql', state: 'failing', n: 1 },
      { kind: 'http', state: 'active', n: 7 },
    ]);
    const exposition = await registry.metrics();
    const counts = series(exposition, 'menu_sync_sinks');
    expect(counts.size).toBe(16);
    expect(counts.get('kind="http",state="active"')).toBe(7);
    expect(counts.get('kind="nats",state="disabled"')).toBe(0);
    expect(exposition).toContain('menu_sync_sinks_failing 3\n');
  });

  it('takes METRICS_SINK_SERIES from the configuration the application is given', async () => {
    const module = await Test.createTestingModule({
      imports: [ConfigModule.forRoot(loadConfig({ METRICS_SINK_SERIES: '2' }))],
      providers: [MetricsService],
    }).compile();
    const metrics = module.get(MetricsService);
    report(metrics.sinks, 5);
    expect(sinksOf(await metrics.registry.metrics(), 'menu_sync_sink_lag_changes').sort()).toEqual([3, 4].map(sinkId));
    await module.close();
  });
});

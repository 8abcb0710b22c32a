import 'reflect-metadata';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { MetricsService } from '../src/observability/metrics.service.js';
import { ROOT_DIR } from './support/daemon-process.js';

/**
 * The ops bundle in deploy/: Prometheus alert rules that `promtool` (Debian's `prometheus`
 * package; .ci/run installs it) accepts and whose unit tests pass, and a Grafana dashboard and
 * rules that chart only metric families the daemon exposes (docs/reference.md §10) or that §11 names.
 */

const run = promisify(execFile);
const DEPLOY = path.join(ROOT_DIR, 'deploy');
/** docs/reference.md §11's sink metrics: not in this daemon's registry yet (they come with the sinks). */
const SINK_FAMILIES = [
  'menu_sync_change_log_head',
  'menu_sync_sink_lag_changes',
  'menu_sync_sink_deliveries_total',
  'menu_sync_sink_delivery_seconds',
];

async function exposedFamilies(): Promise<Set<string>> {
  const metrics = new MetricsService();
  const names = (await metrics.registry.getMetricsAsJSON()).flatMap((metric) =>
    String(metric.type) === 'histogram'
      ? [metric.name, `${metric.name}_bucket`, `${metric.name}_sum`, `${metric.name}_count`]
      : [metric.name],
  );
  return new Set([...names, ...SINK_FAMILIES, ...SINK_FAMILIES.map((name) => `${name}_bucket`)]);
}

const referenced = (text: string) => new Set(text.match(/menu_sync_\w+/g) ?? []);

describe('deploy/: the ops bundle', () => {
  it('promtool accepts the alert rules, and their unit tests pass', async () => {
    const check = await run('promtool', ['check', 'rules', 'alerts.yml'], { cwd: path.join(DEPLOY, 'prometheus') });
    expect(check.stdout).toContain('SUCCESS: 9 rules found');
    const tests = await run('promtool', ['test', 'rules', 'alerts.test.yml'], { cwd: path.join(DEPLOY, 'prometheus') });
    expect(tests.stdout).toContain('SUCCESS');
  });

  it('the rules cover lag growing, parked events, a failing sink, reauthorization, the 503 rate and reconcile failing', async () => {
    const rules = await readFile(path.join(DEPLOY, 'prometheus', 'alerts.yml'), 'utf8');
    const alerts = [...rules.matchAll(/- alert: (\w+)/g)].map((match) => match[1]);
    expect(alerts).toEqual(
      expect.arrayContaining([
        'MenuSyncProjectionLagGrowing',
        'MenuSyncParkedEvents',
        'MenuSyncSinkFailing',
        'MenuSyncConnectionNeedsReauthorization',
        'MenuSyncWebhook503Rate',
        'MenuSyncReconcileFailing',
      ]),
    );
  });

  it('the dashboard is Grafana JSON whose every query and rule names a family the daemon exposes', async () => {
    const exposed = await exposedFamilies();
    const dashboard = JSON.parse(await readFile(path.join(DEPLOY, 'grafana', 'menu-sync.json'), 'utf8'));
    expect(dashboard).toMatchObject({ title: 'menu-sync', uid: 'menu-sync', panels: expect.any(Array) });
    const queries = dashboard.panels.flatMap((panel: { targets?: Array<{ expr: string }> }) =>
      (panel.targets ?? []).map((target) => target.expr),
    );
    expect(queries.length).toBeGreaterThan(15);
    const rules = await readFile(path.join(DEPLOY, 'prometheus', 'alerts.yml'), 'utf8');
    const unknown = [...referenced(queries.join('\n') + rules)].filter((name) => !exposed.has(name));
    expect(unknown).toEqual([]);
    // Every family of docs/reference.md §10 is charted.
    for (const family of [
      'menu_sync_webhook_deliveries_total',
      'menu_sync_event_append_seconds_bucket',
      'menu_sync_log_head_position',
      'menu_sync_projection_position',
      'menu_sync_projection_lag_events',
      'menu_sync_parked_events',
      'menu_sync_upstream_requests_total',
      'menu_sync_token_refreshes_total',
      ...SINK_FAMILIES.filter((name) => name !== 'menu_sync_sink_delivery_seconds'),
      'menu_sync_sink_delivery_seconds_bucket',
    ]) {
      expect({ family, charted: queries.some((query: string) => query.includes(family)) }).toEqual({
        family,
        charted: true,
      });
    }
  });

  it('docker-compose.yml runs PostgreSQL, NATS with JetStream, and menu-sync from the Dockerfile', async () => {
    const compose = await readFile(path.join(DEPLOY, 'docker-compose.yml'), 'utf8');
    expect(compose).toMatch(/^ {2}postgres:\n {4}image: postgres:/m);
    expect(compose).toMatch(/^ {2}nats:\n {4}image: nats:[\s\S]*--jetstream/m);
    expect(compose).toMatch(/^ {2}menu-sync:\n {4}build:\n {6}context: \.\.\n {6}dockerfile: Dockerfile/m);
    expect(compose).toContain('DATABASE_URL: postgres://');
    expect(compose).toContain('NATS_URL: nats://nats:4222');
  });
});

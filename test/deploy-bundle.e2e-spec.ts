import 'reflect-metadata';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { access, readFile } from 'node:fs/promises';
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

interface ComposeService {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string | undefined>;
  depends_on?: string[] | Record<string, unknown>;
  volumes?: string[];
}

/** js-yaml as docker compose reads the file: `<<` merge keys applied. */
const { load } = createRequire(import.meta.url)('js-yaml') as { load(text: string): unknown };

function merged(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(merged);
  if (node === null || typeof node !== 'object') return node;
  const { '<<': base, ...own } = node as Record<string, unknown>;
  const entries = Object.entries(own).map(([key, value]) => [key, merged(value)]);
  return { ...(merged(base) as object | undefined), ...Object.fromEntries(entries) };
}

async function readCompose(): Promise<{
  services: Record<string, ComposeService & { environment: Record<string, string | undefined> }>;
}> {
  return merged(load(await readFile(path.join(DEPLOY, 'docker-compose.yml'), 'utf8'))) as never;
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

  it('docker-compose.yml runs PostgreSQL and its streaming replica, NATS with JetStream, and the roles split from the Dockerfile', async () => {
    const compose = await readCompose();
    const services = compose.services;
    expect(Object.keys(services).sort()).toEqual(
      ['api-1', 'api-2', 'balancer', 'nats', 'postgres', 'postgres-replica', 'worker', 'worker-standby'].sort(),
    );
    expect(services.postgres.image).toMatch(/^postgres:/);
    expect(services['postgres-replica'].image).toBe(services.postgres.image);
    expect(services.nats.command).toContain('--jetstream');
    const daemons = ['api-1', 'api-2', 'worker', 'worker-standby'];
    expect(daemons.map((name) => [name, services[name].build, services[name].environment.ROLES])).toEqual([
      ['api-1', { context: '..', dockerfile: 'Dockerfile' }, 'ingress,api,console'],
      ['api-2', { context: '..', dockerfile: 'Dockerfile' }, 'ingress,api,console'],
      ['worker', { context: '..', dockerfile: 'Dockerfile' }, 'projector,sinks,reconcile'],
      ['worker-standby', { context: '..', dockerfile: 'Dockerfile' }, 'projector,sinks,reconcile'],
    ]);
    for (const name of daemons) {
      const { environment } = services[name];
      expect(environment.DATABASE_URL).toMatch(/^postgres:\/\/menu_sync:.*@postgres:5432\/menu_sync$/);
      expect(environment.NATS_URL).toBe('nats://nats:4222');
      expect(environment.DATABASE_READ_URL?.replace(/:\/\/.*@/, '://…@')).toBe(
        name.startsWith('api') ? 'postgres://…@postgres-replica:5432/menu_sync' : undefined,
      );
    }
  });

  it('every service the compose file depends on exists, and every file it mounts is in deploy/', async () => {
    const { services } = await readCompose();
    for (const service of Object.values(services)) {
      const needs = Array.isArray(service.depends_on) ? service.depends_on : Object.keys(service.depends_on ?? {});
      expect(needs.filter((name) => !(name in services))).toEqual([]);
      for (const volume of service.volumes ?? []) {
        const source = volume.split(':')[0];
        if (source.startsWith('./')) await expect(access(path.join(DEPLOY, source))).resolves.toBeUndefined();
      }
    }
    const replica = await readFile(path.join(DEPLOY, 'postgres', 'replica-entrypoint.sh'), 'utf8');
    expect(replica).toContain('pg_basebackup --host=postgres --username=replicator');
    expect(replica).toContain('--write-recovery-conf');
  });
});

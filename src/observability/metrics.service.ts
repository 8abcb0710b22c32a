import { Injectable, Optional } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { AppConfig } from '../config/app-config.js';
import { SinkSeries } from './sink-series.js';

const DEFAULT_SINK_SERIES = 20;

/** One registry per application instance (tests boot several apps in one process). */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  readonly webhookDeliveries = new Counter({
    name: 'menu_sync_webhook_deliveries_total',
    help: 'Webhook deliveries by outcome',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly appendSeconds = new Histogram({
    name: 'menu_sync_event_append_seconds',
    help: 'Time from a delivery entering the append queue to its commit',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  readonly appendBatchSize = new Histogram({
    name: 'menu_sync_event_append_batch_size',
    help: 'Deliveries committed together by one append',
    buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500],
    registers: [this.registry],
  });

  readonly logHead = new Gauge({
    name: 'menu_sync_log_head_position',
    help: 'Highest position appended to the event log',
    registers: [this.registry],
  });

  readonly projectionPosition = new Gauge({
    name: 'menu_sync_projection_position',
    help: 'Last log position applied by a projection',
    labelNames: ['projection'] as const,
    registers: [this.registry],
  });

  readonly projectionLag = new Gauge({
    name: 'menu_sync_projection_lag_events',
    help: 'Events in the log not yet applied by a projection',
    labelNames: ['projection'] as const,
    registers: [this.registry],
  });

  readonly parkedEvents = new Gauge({
    name: 'menu_sync_parked_events',
    help: 'Events a projection could not apply',
    labelNames: ['projection'] as const,
    registers: [this.registry],
  });

  readonly upstreamRequests = new Counter({
    name: 'menu_sync_upstream_requests_total',
    help: 'Calls to the upstream platform by HTTP status (0 for a network fault)',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });

  readonly tokenRefreshes = new Counter({
    name: 'menu_sync_token_refreshes_total',
    help: 'OAuth token refreshes by result',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly connections = new Gauge({
    name: 'menu_sync_connections',
    help: 'Upstream connections by state (active, reauthorization_required)',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });

  readonly reconcileRuns = new Counter({
    name: 'menu_sync_reconcile_runs_total',
    help: 'Reconcile runs by outcome (ok, partial, failed, skipped)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly reconcileDifferences = new Counter({
    name: 'menu_sync_reconcile_differences_total',
    help: 'Differences reconcile found between the upstream and the mirror, by resource type and kind',
    labelNames: ['type', 'kind'] as const,
    registers: [this.registry],
  });

  readonly reconcileSkippedDocuments = new Counter({
    name: 'menu_sync_reconcile_skipped_documents_total',
    help: 'Snapshot documents reconcile skipped (failed or unrecognised answers), by resource type',
    labelNames: ['type'] as const,
    registers: [this.registry],
  });

  readonly sinkDispatchers = new Gauge({
    name: 'menu_sync_sink_dispatchers',
    help: 'Sink dispatchers alive on the database, sharing its sinks, as this process last saw (0: it is none)',
    registers: [this.registry],
  });

  /** The sink metrics: by kind, and by sink for the METRICS_SINK_SERIES most lagging or failing (docs/reference.md §11). */
  readonly sinks: SinkSeries;

  constructor(@Optional() config?: AppConfig) {
    collectDefaultMetrics({ register: this.registry, prefix: 'menu_sync_' });
    this.sinks = new SinkSeries(this.registry, config?.METRICS_SINK_SERIES ?? DEFAULT_SINK_SERIES);
  }

  /** Raises the head gauge; appends finish out of order, so it never moves back. */
  observeHead(position: number): void {
    if (position <= this.head) return;
    this.head = position;
    this.logHead.set(position);
  }

  private head = 0;
}

import { getMetrics } from './api.js';

/**
 * The Activity charts' data: /metrics sampled in the browser every 2 s from the moment the console
 * opens, an hour kept (and carried over a reload of the tab through sessionStorage).
 */
const INTERVAL_MS = 2000;
const WINDOW_MS = 60 * 60 * 1000;
const STORE_KEY = 'menu-sync.activity';
const ACCEPTED = new Set(['accepted', 'unhandled', 'duplicate']);
const UNAVAILABLE = new Set(['unavailable']);

let samples = load();
let previous;
const listeners = new Set();
let started = false;

function load() {
  try {
    const kept = JSON.parse(sessionStorage.getItem(STORE_KEY) ?? '[]');
    return Array.isArray(kept) ? kept.filter((sample) => sample.t > Date.now() - WINDOW_MS) : [];
  } catch {
    return [];
  }
}

function total(metrics, name, filter = () => true) {
  return metrics.filter((m) => m.name === name && filter(m.labels)).reduce((sum, m) => sum + m.value, 0);
}

function byLabel(metrics, name, label) {
  const out = {};
  for (const metric of metrics.filter((m) => m.name === name)) out[metric.labels[label]] = metric.value;
  return out;
}

async function sample() {
  const metrics = await getMetrics();
  const t = Date.now();
  const counters = {
    accepted: total(metrics, 'menu_sync_webhook_deliveries_total', (l) => ACCEPTED.has(l.outcome)),
    unavailable: total(metrics, 'menu_sync_webhook_deliveries_total', (l) => UNAVAILABLE.has(l.outcome)),
    refused: total(
      metrics,
      'menu_sync_webhook_deliveries_total',
      (l) => !ACCEPTED.has(l.outcome) && !UNAVAILABLE.has(l.outcome),
    ),
    sink_ok: total(metrics, 'menu_sync_sinks_deliveries_total', (l) => l.outcome === 'ok'),
  };
  const rate = (key) => {
    if (!previous) return null;
    const seconds = (t - previous.t) / 1000;
    // A restarted daemon starts its counters from 0 again.
    return counters[key] >= previous.counters[key] ? (counters[key] - previous.counters[key]) / seconds : null;
  };
  const point = {
    t,
    rates: {
      accepted: rate('accepted'),
      refused: rate('refused'),
      unavailable: rate('unavailable'),
      sink_ok: rate('sink_ok'),
    },
    projectionLag: byLabel(metrics, 'menu_sync_projection_lag_events', 'projection'),
    sinkLag: byLabel(metrics, 'menu_sync_sink_lag_changes', 'sink'),
  };
  previous = { t, counters };
  samples = [...samples.filter((s) => s.t > t - WINDOW_MS), point];
  if (samples.length % 5 === 0) sessionStorage.setItem(STORE_KEY, JSON.stringify(samples));
  listeners.forEach((listener) => listener(samples, undefined));
}

export function startSampling() {
  if (started) return;
  started = true;
  const tick = () =>
    sample()
      .catch((error) => listeners.forEach((listener) => listener(samples, error)))
      .finally(() => setTimeout(tick, INTERVAL_MS));
  void tick();
}

export function subscribe(listener) {
  listeners.add(listener);
  listener(samples, undefined);
  return () => listeners.delete(listener);
}

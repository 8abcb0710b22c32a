import { html } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { getJson } from '../api.js';
import { count } from '../format.js';
import { subscribe } from '../sampler.js';
import { Async, Empty, ErrorBox, Loading, Panel, usePoll } from '../ui.js';

const COLORS = ['#2563eb', '#dc2626', '#d97706', '#059669', '#7c3aed', '#0891b2'];

/** A uPlot line chart sized to its container; `series` = [{label, values}] aligned with `times` (s). */
function Chart({ times, series, unit }) {
  const box = useRef();
  const plot = useRef();
  const labels = series.map((s) => s.label).join('|');
  useEffect(() => {
    const width = box.current.clientWidth;
    plot.current = new uPlot(
      {
        width,
        height: 220,
        scales: { x: { time: true }, y: { range: (_u, min, max) => [0, Math.max(1, max * 1.1)] } },
        axes: [
          { stroke: '#64748b', grid: { stroke: '#e2e8f0' } },
          { stroke: '#64748b', grid: { stroke: '#e2e8f0' }, size: 60, label: unit },
        ],
        series: [
          {},
          ...series.map((s, i) => ({
            label: s.label,
            stroke: COLORS[i % COLORS.length],
            width: 2,
            spanGaps: true,
            points: { show: false },
          })),
        ],
      },
      [times, ...series.map((s) => s.values)],
      box.current,
    );
    const resize = () => plot.current.setSize({ width: box.current.clientWidth, height: 220 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.current.destroy();
    };
  }, [labels]);
  useEffect(() => plot.current?.setData([times, ...series.map((s) => s.values)]), [times, series]);
  return html`<div class="chart" ref=${box}></div>`;
}

function seriesOf(samples, pick) {
  const keys = [...new Set(samples.flatMap((s) => Object.keys(pick(s))))].sort();
  return keys.map((key) => ({ label: key, values: samples.map((s) => pick(s)[key] ?? null) }));
}

function keyed(minutes, pick) {
  const keys = [...new Set(minutes.flatMap((minute) => Object.keys(pick(minute))))].sort();
  return keys.map((key) => ({ label: key, values: minutes.map((minute) => pick(minute)[key] ?? 0) }));
}

const total = (series) => series.reduce((sum, s) => sum + s.values.reduce((a, b) => a + b, 0), 0);

/** The last 24 hours per minute, from PostgreSQL (GET /api/v1/activity): what happened before this tab opened. */
function History() {
  const history = usePoll(() => getJson('/api/v1/activity'), 15_000);
  return html`<${Async} state=${history} what="the activity history" isEmpty=${() => false}>
    ${({ minutes, since, until }) => {
      const times = minutes.map((minute) => Date.parse(minute.minute) / 1000);
      const flow = [
        { label: 'events received', values: minutes.map((minute) => minute.events) },
        { label: 'changes published', values: minutes.map((minute) => minute.changes) },
      ];
      const deliveries = keyed(minutes, (minute) => minute.deliveries);
      const failures = keyed(minutes, (minute) => minute.failures);
      return html`<p class="muted" data-testid="history-span">
          Per minute from ${new Date(since).toLocaleString()} to ${new Date(until).toLocaleString()}, kept in
          PostgreSQL: ${count(total(flow.slice(0, 1)))} events received, ${count(total(flow.slice(1)))} changes
          published, ${count(total(deliveries))} changes delivered, ${count(total(failures))} failures.
        </p>
        <div class="grid">
          <${Panel} title="Events received and changes published per minute" id="history-flow"><${Chart} times=${times} series=${flow} unit="per min" /></${Panel}>
          <${Panel} title="Changes delivered per minute, by sink kind" id="history-deliveries">
            ${deliveries.length === 0 ? html`<${Empty} title="No delivery in 24 h">Deliveries to sinks appear here by kind.</${Empty}>` : html`<${Chart} times=${times} series=${deliveries} unit="per min" />`}
          </${Panel}>
          <${Panel} title="Failures per minute (failed sink attempts by kind; webhook: rejected deliveries)" id="history-failures">
            ${failures.length === 0 ? html`<${Empty} title="No failure in 24 h">Failed delivery attempts and rejected webhooks appear here.</${Empty}>` : html`<${Chart} times=${times} series=${failures} unit="per min" />`}
          </${Panel}>
        </div>`;
    }}
  </${Async}>`;
}

export function Activity() {
  return html`<h2 class="page-section">The last 24 hours</h2>
    <${History} />
    <h2 class="page-section">Live, sampled by this tab</h2>
    <${Live} />`;
}

function Live() {
  const [state, setState] = useState({ samples: [], error: undefined });
  useEffect(() => subscribe((samples, error) => setState({ samples, error })), []);
  const { samples, error } = state;
  if (samples.length < 2) {
    return error
      ? html`<${ErrorBox} error=${error} what="Could not sample /metrics" />`
      : html`<${Loading} what="Sampling /metrics (every 2 s; the charts fill as the console stays open)" />`;
  }
  const times = samples.map((s) => s.t / 1000);
  const deliveries = [
    { label: 'accepted', values: samples.map((s) => s.rates.accepted) },
    { label: 'refused (4XX)', values: samples.map((s) => s.rates.refused) },
    { label: 'unavailable (503)', values: samples.map((s) => s.rates.unavailable) },
  ];
  const projectionLag = seriesOf(samples, (s) => s.projectionLag);
  const sinkLag = seriesOf(samples, (s) => s.sinkLag);
  const seconds = Math.round((samples.at(-1).t - samples[0].t) / 1000);
  const span = seconds < 120 ? `${seconds} seconds` : `${Math.round(seconds / 60)} minutes`;
  return html`
    ${error ? html`<div class="stale">Sampling failed: ${error.message}</div>` : null}
    <p class="muted">The last ${span} (up to an hour), sampled from <span class="mono">/metrics</span> by this tab.</p>
    <div class="grid">
      <${Panel} title="Webhook deliveries per second" id="deliveries"><${Chart} times=${times} series=${deliveries} unit="per s" /></${Panel}>
      <${Panel} title="Projector lag (events)" id="projection-lag"><${Chart} times=${times} series=${projectionLag} unit="events" /></${Panel}>
      <${Panel} title="Sink lag (changes)" id="sink-lag">
        ${
          sinkLag.length === 0
            ? html`<${Empty} title="No sink to chart">Sink lag appears here once sinks exist (reference §11).</${Empty}>`
            : html`<${Chart} times=${times} series=${sinkLag} unit="changes" />`
        }
      </${Panel}>
    </div>`;
}

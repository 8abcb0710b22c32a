import { html } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';

/**
 * Runs `load` now and then every `intervalMs` (never two at once, paused while the tab is hidden),
 * keeping the last good data beside the last error: a failed refresh does not blank the page.
 */
export function usePoll(load, intervalMs, deps = []) {
  const [state, setState] = useState({ data: undefined, error: undefined, loading: true });
  const generation = useRef(0);
  useEffect(() => {
    const mine = ++generation.current;
    let timer;
    setState({ data: undefined, error: undefined, loading: true });
    const tick = async () => {
      if (document.visibilityState !== 'hidden') {
        try {
          const data = await load();
          if (generation.current === mine) setState({ data, error: undefined, loading: false });
        } catch (error) {
          if (generation.current === mine) setState((previous) => ({ ...previous, error, loading: false }));
        }
      }
      if (generation.current === mine && intervalMs > 0) timer = setTimeout(tick, intervalMs);
    };
    void tick();
    return () => {
      generation.current++;
      clearTimeout(timer);
    };
  }, deps);
  return state;
}

export const Loading = ({ what = 'Loading' }) =>
  html`<div class="state loading" role="status"><span class="spinner"></span>${what}…</div>`;

export const Empty = ({ title, children }) =>
  html`<div class="state empty"><strong>${title}</strong>${children ? html`<p>${children}</p>` : null}</div>`;

export function ErrorBox({ error, what }) {
  if (!error) return null;
  const status = error.status ? ` (HTTP ${error.status})` : '';
  return html`<div class="state error" role="alert">
    <strong>${what ?? 'Could not load this'}${status}</strong>
    <p>${error.message}</p>
  </div>`;
}

/** Loading → error → empty → content, the same way on every panel. */
export function Async({ state, what, empty, isEmpty = (data) => Array.isArray(data) && data.length === 0, children }) {
  if (state.data === undefined)
    return state.error
      ? html`<${ErrorBox} error=${state.error} what=${`Could not load ${what}`} />`
      : html`<${Loading} what=${`Loading ${what}`} />`;
  return html` ${state.error ? html`<div class="stale" role="status">Showing the last answer: ${state.error.message}</div>` : null}
  ${isEmpty(state.data) ? empty : children(state.data)}`;
}

const TONES = {
  active: 'good',
  ok: 'good',
  registered: 'good',
  idle: 'good',
  running: 'good',
  caught_up: 'good',
  applied: 'good',
  current: 'good',
  retrying: 'warn',
  retry: 'warn',
  partial: 'warn',
  skipped: 'muted',
  pending: 'warn',
  superseded: 'muted',
  older: 'warn',
  stopped: 'muted',
  standby: 'muted',
  reauthorization_required: 'bad',
  failing: 'bad',
  failed: 'bad',
  disabled: 'muted',
  parked: 'bad',
  error: 'bad',
};

export const Badge = ({ value, tone }) =>
  html`<span class=${`badge ${tone ?? TONES[value] ?? 'muted'}`}>${String(value).replaceAll('_', ' ')}</span>`;

export const Panel = ({ title, aside, children, id, wide }) =>
  html` <section class=${wide ? 'panel wide' : 'panel'} id=${id}>
    <header>
      <h2>${title}</h2>
      ${aside ? html`<div class="aside">${aside}</div>` : null}
    </header>
    ${children}
  </section>`;

export const Stat = ({ label, value, tone, hint }) =>
  html` <div class=${`stat ${tone ?? ''}`}>
    <span class="label">${label}</span
    ><span class="value">${value}</span>${hint ? html`<span class="hint">${hint}</span>` : null}
  </div>`;

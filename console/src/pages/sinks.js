import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, deleteJson, getJson, patchJson, postJson } from '../api.js';
import { count, duration, fromNow, when } from '../format.js';
import { Async, Badge, Empty, Panel, usePoll } from '../ui.js';

const REFRESH_MS = 2000;
/** Sinks shown at first, and added by "Show more". */
const PAGE = 25;
/** The first rows show their delivery attempts by themselves (failing ones come first); the others on request. */
const ATTEMPTS_OPEN = 3;
const STATES = ['failing', 'retrying', 'disabled', 'active'];

/** A daemon without /api/v1/sinks (or its summary) answers 404, shown as "not available". */
async function orNotAvailable(load) {
  try {
    return { available: true, ...(await load()) };
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return { available: false };
    throw error;
  }
}

/** Counts by state and kind, the failing and the most lagging sinks (docs/reference.md §13). */
export const loadSinksSummary = () => orNotAvailable(async () => (await getJson('/api/v1/sinks/summary')).data);

/** The first `shown` sinks, failing first, a page of at most 1000 at a time. */
function loadSinks({ shown, q, state }) {
  return orNotAvailable(async () => {
    const data = [];
    let after = null;
    do {
      const query = new URLSearchParams({ order: 'failing', limit: String(Math.min(1000, shown - data.length)) });
      if (q) query.set('q', q);
      if (state) query.set('state', state);
      if (after) query.set('after', after);
      const page = await getJson(`/api/v1/sinks?${query}`);
      data.push(...page.data);
      after = page.next_cursor;
    } while (after && data.length < shown);
    return { data, more: after !== null };
  });
}

/** Where a sink delivers; a table sink's URL comes masked from the API. */
function sinkTarget(sink) {
  switch (sink.kind) {
    case 'nats':
      return `NATS ${sink.stream ?? ''} ${sink.subject_prefix ?? 'menu'}.>`;
    case 'postgres':
      return `PostgreSQL ${sink.url} (schema ${sink.schema})`;
    case 'mysql':
      return `MySQL ${sink.url} (tables ${sink.table_prefix}…)`;
    default:
      return sink.url;
  }
}

/** A lag count that stopped at its bound reads "10,000+". */
const lagText = (lag, capped) => `${count(lag)}${capped ? '+' : ''}`;
const shortId = (id) => String(id).slice(0, 8);

/** What the summary says: counts by state (each a filter), and the sinks furthest behind. */
function SinkCounts({ summary, state, setState, search }) {
  if (!summary?.available) return null;
  return html`<div class="sink-counts">
    ${STATES.map(
      (name) =>
        html`<button
          type="button"
          class=${state === name ? 'count selected' : 'count'}
          aria-pressed=${state === name}
          onClick=${() => setState(state === name ? undefined : name)}
        >
          <${Badge} value=${name} /> ${count(summary.by_state[name] ?? 0)}
        </button>`,
    )}
    ${
      summary.most_lagging.length > 0
        ? html`<span class="most-lagging"
            >Most behind:
            ${summary.most_lagging.map(
              (sink) =>
                html` <a href="#/" class="mono" onClick=${(event) => (event.preventDefault(), search(sink.id))}
                    >${shortId(sink.id)}</a
                  >${` (${lagText(sink.lag, sink.lag_capped)})`}`,
            )}</span
          >`
        : null
    }
  </div>`;
}

/**
 * The sinks, failing first, a page at a time ("Show more"), with the summary's counts and a
 * search by id prefix or owner; at thousands of sinks (one per store) nothing loads them all.
 */
export function SinksPanel({ summary, canWrite }) {
  const [shown, setShown] = useState(PAGE);
  const [typed, setTyped] = useState('');
  const [q, setQ] = useState('');
  const [state, setState] = useState();
  const [message, setMessage] = useState();
  // Searching waits for a pause in the typing.
  useEffect(() => {
    const timer = setTimeout(() => setQ(typed.trim()), 300);
    return () => clearTimeout(timer);
  }, [typed]);
  useEffect(() => setShown(PAGE), [q, state]);
  const sinks = usePoll(() => loadSinks({ shown, q, state }), REFRESH_MS, [shown, q, state]);
  const filtered = q !== '' || state !== undefined;

  const replay = async (sink) => {
    if (!confirm(`Deliver every change again to sink ${shortId(sink.id)}, from the start?`)) return;
    try {
      await postJson(`/api/v1/sinks/${sink.id}/replay`, { from: 'start' });
      setMessage(`Sink ${sink.id} replays from the start.`);
    } catch (error) {
      setMessage(`Replay refused: ${error.message}`);
    }
  };
  // Pausing is the API's disabled state: the sink keeps its cursor and delivers nothing until resumed.
  const setActive = async (sink, active) => {
    try {
      await patchJson(`/api/v1/sinks/${sink.id}`, { state: active ? 'active' : 'disabled' });
      setMessage(`Sink ${sink.id} ${active ? 'resumed' : 'paused'}.`);
    } catch (error) {
      setMessage(`${active ? 'Resume' : 'Pause'} refused: ${error.message}`);
    }
  };
  const remove = async (sink) => {
    if (!confirm(`Remove sink ${shortId(sink.id)}? It stops delivering and is gone for good.`)) return;
    try {
      await deleteJson(`/api/v1/sinks/${sink.id}`);
      setMessage(`Sink ${sink.id} removed.`);
    } catch (error) {
      setMessage(`Remove refused: ${error.message}`);
    }
  };
  const actions = { replay, setActive, remove };
  const search = html`<input
    type="search"
    class="sink-search"
    placeholder="Search by sink id or owner"
    aria-label="Search sinks by id or owner"
    value=${typed}
    onInput=${(event) => setTyped(event.currentTarget.value)}
  />`;
  return html`
    <${Panel} title="Sinks" id="sinks" wide aside=${summary.data?.available && (summary.data.total > 0 || filtered) ? search : null}>
      <${SinkCounts} summary=${summary.data} state=${state} setState=${setState} search=${setTyped} />
      <${Async} state=${sinks} what="sinks" isEmpty=${(data) => !data.available || data.data.length === 0}
        empty=${
          sinks.data?.available === false
            ? html`<${Empty} title="Sinks are not available on this daemon">This version serves no <span class="mono">/api/v1/sinks</span>; the pull feed and push sinks come with a newer one.</${Empty}>`
            : filtered
              ? html`<${Empty} title="No sink matches">No sink${state ? ` ${state}` : ''}${q ? html` whose id starts with, or whose owners include, <span class="mono">${q}</span>` : ''}.</${Empty}>`
              : html`<${Empty} title="No sinks yet">Push changes to your catalogue with <span class="mono">menu-sync sinks add</span> or <span class="mono">POST /api/v1/sinks</span>.</${Empty}>`
        }>
        ${(data) =>
          html` ${message ? html`<div class="stale">${message}</div>` : null}
            <div class="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th>#</th>
                    <th>Target</th>
                    <th>Owners</th>
                    <th>State</th>
                    <th class="num">Lag</th>
                    <th>Last success</th>
                    <th>Next attempt</th>
                    <th></th>
                  </tr>
                </thead>
                <tbody>
                  ${data.data.map(
                    (sink, index) =>
                      html`<${SinkRow}
                        key=${sink.id}
                        sink=${sink}
                        attemptsOpen=${index < ATTEMPTS_OPEN}
                        canWrite=${canWrite}
                        actions=${actions}
                      />`,
                  )}
                </tbody>
              </table>
            </div>
            ${
              data.more
                ? html`<p class="more">
                    <button type="button" onClick=${() => setShown(shown + PAGE)}>Show more sinks</button>
                    <span class="muted"> ${count(data.data.length)} shown</span>
                  </p>`
                : null
            }`}
      </${Async}>
    </${Panel}>`;
}

function SinkRow({ sink, attemptsOpen, canWrite, actions }) {
  const [open, setOpen] = useState(attemptsOpen);
  useEffect(() => setOpen(attemptsOpen), [attemptsOpen]);
  return html` <tr class="sink">
      <td class="mono" title=${sink.id}>${shortId(sink.id)}</td>
      <td>
        <span class="mono">${sinkTarget(sink)}${sink.layout ? ` · ${sink.layout} layout` : ''}</span>
      </td>
      <td class="mono">
        ${sink.owner_ids === null ? html`<span class="muted">every owner</span>` : sink.owner_ids.join(', ')}
      </td>
      <td>
        <${Badge}
          value=${sink.state}
        />${sink.last_error ? html`<div class="error-text">${sink.last_error}</div>` : null}
      </td>
      <td class="num" title=${sink.lag_capped ? 'counted up to a bound: at least this many' : ''}>
        ${lagText(sink.lag, sink.lag_capped)}
      </td>
      <td title=${when(sink.last_success_at)}>${fromNow(sink.last_success_at)}</td>
      <td title=${when(sink.next_attempt_at)}>${sink.next_attempt_at ? fromNow(sink.next_attempt_at) : '—'}</td>
      <td class="actions">
        ${open ? null : html`<button type="button" onClick=${() => setOpen(true)}>Attempts</button>`}
        ${
          canWrite
            ? html`<button type="button" onClick=${() => actions.replay(sink)}>Replay</button>
                ${
                  sink.state === 'disabled'
                    ? html`<button type="button" onClick=${() => actions.setActive(sink, true)}>Resume</button>`
                    : html`<button type="button" onClick=${() => actions.setActive(sink, false)}>Pause</button>`
                }
                <button type="button" onClick=${() => actions.remove(sink)}>Remove</button>`
            : null
        }
      </td>
    </tr>
    ${
      open
        ? html`<tr class="sink-attempts">
            <td></td>
            <td colspan="7"><${SinkAttempts} id=${sink.id} /></td>
          </tr>`
        : null
    }`;
}

const ATTEMPTS_SHOWN = 5;

/** The newest delivery attempts of a sink: what it sent, and what its target answered (docs/reference.md §12). */
function SinkAttempts({ id }) {
  const state = usePoll(
    () => getJson(`/api/v1/sinks/${id}/attempts?limit=${ATTEMPTS_SHOWN}`).then((body) => body.data),
    REFRESH_MS,
    [id],
  );
  return html`<${Async} state=${state} what="attempts"
    empty=${html`<p class="muted">No delivery attempt yet.</p>`}>
    ${(attempts) =>
      html`<table class="attempts">
        <thead>
          <tr>
            <th>Attempt</th>
            <th>Outcome</th>
            <th class="num">Status</th>
            <th>Changes (seq)</th>
            <th class="num">Took</th>
            <th>Answer</th>
          </tr>
        </thead>
        <tbody>
          ${attempts.map(
            (attempt) =>
              html`<tr>
                <td class="when" title=${when(attempt.at)}>${fromNow(attempt.at)}</td>
                <td><${Badge} value=${attempt.outcome} /></td>
                <td class="num mono">${attempt.status}</td>
                <td class="mono" title=${attempt.webhook_id ?? ''}>
                  ${count(attempt.batch.changes)} (${attempt.batch.first_seq}–${attempt.batch.last_seq})
                </td>
                <td class="num">${duration(attempt.duration_ms)}</td>
                <td>
                  ${attempt.error ? html`<div class="error-text">${attempt.error}</div>` : null}
                  ${attempt.response ? html`<div class="mono response">${attempt.response}</div>` : null}
                </td>
              </tr>`,
          )}
        </tbody>
      </table>`}
  </${Async}>`;
}

import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, getJson, openRaw } from '../api.js';
import { when } from '../format.js';
import { Async, Badge, Empty, ErrorBox, Loading, Panel, usePoll } from '../ui.js';

const PAGE = 100;
const SUBJECT_TYPES = ['collection', 'product', 'trait', 'trait_option', 'order', 'store'];
const SOURCES = ['webhook', 'reconcile', 'import'];

function hashParams() {
  return new URLSearchParams(location.hash.split('?')[1] ?? '');
}

/** A page of the log newest first (the matches of the filters), below `before` (a next_cursor) or from the newest. */
async function loadEvents(filters, before) {
  const params = new URLSearchParams({ limit: String(PAGE), before: before ?? 'latest' });
  if (filters.type) params.set('event_type', filters.type);
  if (filters.subjectType) params.set('subject_type', filters.subjectType);
  if (filters.subjectId) params.set('subject_id', filters.subjectId);
  const [events, parked] = await Promise.all([
    getJson(`/api/v1/events?${params}`),
    getJson('/api/v1/projections/parked'),
  ]);
  const parkedAt = new Map(parked.data.map((entry) => [entry.position, entry]));
  const rows = events.data.filter((event) => !filters.source || event.source === filters.source);
  return { rows, parked: parked.data, parkedAt, next: events.next_cursor };
}

/** Older and Newer buttons over a stack of next_cursors (empty: the newest page). */
export function usePages(reset) {
  const [cursors, setCursors] = useState([]);
  useEffect(() => setCursors([]), [reset]);
  return {
    before: cursors.at(-1),
    Pager: ({ next, what }) =>
      html`<p class="more pager">
        <button type="button" disabled=${cursors.length === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>
          Newer
        </button>
        <button type="button" disabled=${!next} onClick=${() => setCursors([...cursors, next])}>Older</button>
        <span class="muted"> ${cursors.length === 0 ? `the newest ${what}` : `page ${cursors.length + 1}`}</span>
      </p>`,
  };
}

export function Events() {
  const initial = hashParams();
  const [filters, setFilters] = useState({
    type: '',
    subjectType: initial.get('subject_type') ?? '',
    subjectId: initial.get('subject_id') ?? '',
    source: '',
  });
  const [selected, setSelected] = useState(initial.get('position') ? Number(initial.get('position')) : undefined);
  const pages = usePages(JSON.stringify(filters));
  const events = usePoll(() => loadEvents(filters, pages.before), 3000, [JSON.stringify(filters), pages.before]);
  const set = (key) => (event) => setFilters({ ...filters, [key]: event.currentTarget.value.trim() });
  return html`
    <form class="toolbar filters" onSubmit=${(event) => event.preventDefault()}>
      <label>Event type <input value=${filters.type} onChange=${set('type')} placeholder="e.g. product.updated" /></label>
      <label>Subject type <select value=${filters.subjectType} onChange=${set('subjectType')}>
        <option value="">any</option>${SUBJECT_TYPES.map((type) => html`<option>${type}</option>`)}</select></label>
      <label>Subject id <input value=${filters.subjectId} onChange=${set('subjectId')} placeholder="e.g. 42" size="8" /></label>
      <label>Source <select value=${filters.source} onChange=${set('source')}>
        <option value="">any</option>${SOURCES.map((source) => html`<option>${source}</option>`)}</select></label>
    </form>
    <div class="events-layout">
      <${Panel} title="Event log" id="events" aside=${html`<span class="muted">newest first</span>`}>
        <${Async} state=${events} what="events" isEmpty=${(data) => data.rows.length === 0}
          empty=${html`<${Empty} title="No event matches">Change the filters, or wait for the platform to send one.</${Empty}>`}>
          ${(data) =>
            html` <div class="table-wrap">
                <table class="clickable">
                  <thead>
                    <tr>
                      <th class="num">#</th>
                      <th>Type</th>
                      <th>Subject</th>
                      <th>Source</th>
                      <th>Occurred</th>
                      <th></th>
                    </tr>
                  </thead>
                  <tbody>
                    ${data.rows.map(
                      (event) =>
                        html` <tr
                          class=${event.position === selected ? 'selected' : ''}
                          onClick=${() => setSelected(event.position)}
                          data-position=${event.position}
                        >
                          <td class="num">${event.position}</td>
                          <td class="mono">${event.event_type}</td>
                          <td>${event.subject.type} ${event.subject.id}</td>
                          <td>${event.source}</td>
                          <td>${when(event.occurred_at)}</td>
                          <td>
                            ${data.parkedAt.has(event.position) ? html`<${Badge} value="parked" />` : event.handled === false ? html`<${Badge} value="unhandled" tone="muted" />` : null}
                          </td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
              </div>
              <${pages.Pager} next=${data.next} what="events" />`}
        </${Async}>
      </${Panel}>
      <div class="side">
        ${
          selected
            ? html`<${EventDetail} position=${selected} parked=${events.data?.parkedAt.get(selected)} />`
            : html`<${Panel} title="Event"><${Empty} title="Pick an event">Its payload, its raw bytes and what became of it show here.</${Empty}></${Panel}>`
        }
        <${ParkedList} state=${events} onPick=${setSelected} />
        <${Quarantine} />
      </div>
    </div>`;
}

/** What became of an event: parked, the resource's current version, or older than it. */
async function fateOf(event, parked) {
  if (parked) return { tone: 'parked', text: 'Parked: the projector could not apply it', detail: parked.error };
  if (event.handled === false)
    return { tone: 'skipped', text: 'Not handled: an event type outside the spec, kept in the log' };
  let resource;
  try {
    resource = await getJson(`/api/v1/${event.subject.type}s/${encodeURIComponent(event.subject.id)}`);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    if (error.status === 404)
      return { tone: 'pending', text: 'Not in the read model (yet): the projector may be behind' };
    if (error.status !== 410) throw error;
    resource = error.body;
  }
  const current = resource?.version;
  if (!current) return { tone: 'applied', text: `The ${event.subject.type} is deleted` };
  if (current.position === event.position) return { tone: 'current', text: 'Applied: this is the current version' };
  if (event.position > current.position) {
    return { tone: 'older', text: `Older than the current version (event #${current.position}): it changed nothing` };
  }
  return { tone: 'superseded', text: `Superseded by a newer version (event #${current.position})` };
}

function EventDetail({ position, parked }) {
  const detail = usePoll(
    async () => {
      const event = await getJson(`/api/v1/events/${position}`);
      return { event, fate: await fateOf(event, parked) };
    },
    0,
    [position, parked?.error],
  );
  const [rawError, setRawError] = useState();
  return html`
    <${Panel} title=${`Event #${position}`} id="event-detail"
      aside=${html`<button type="button" onClick=${() => openRaw(position).catch(setRawError)}>Raw bytes</button>`}>
      <${ErrorBox} error=${rawError} what="Could not open the raw bytes" />
      ${
        detail.data === undefined
          ? detail.error
            ? html`<${ErrorBox} error=${detail.error} />`
            : html`<${Loading} what="Loading the event" />`
          : html` <div class=${`fate ${detail.data.fate.tone}`} data-testid="fate">
                <${Badge} value=${detail.data.fate.tone} /> ${detail.data.fate.text}
                ${detail.data.fate.detail ? html`<pre class="error-text">${detail.data.fate.detail}</pre>` : null}
              </div>
              <dl class="facts">
                <dt>Type</dt>
                <dd class="mono">${detail.data.event.event_type}</dd>
                <dt>Subject</dt>
                <dd>${detail.data.event.subject.type} ${detail.data.event.subject.id}</dd>
                <dt>Owner</dt>
                <dd>${detail.data.event.owner_id ?? '—'}</dd>
                <dt>Occurred</dt>
                <dd>${when(detail.data.event.occurred_at)}</dd>
                <dt>Received</dt>
                <dd>${when(detail.data.event.received_at)}</dd>
                <dt>Source</dt>
                <dd>${detail.data.event.source}</dd>
                <dt>SHA-256</dt>
                <dd class="mono hash">${detail.data.event.sha256}</dd>
              </dl>
              <pre class="payload">${JSON.stringify(detail.data.event.payload, null, 2)}</pre>`
      }
    </${Panel}>`;
}

function ParkedList({ state, onPick }) {
  const parked = state.data?.parked ?? [];
  if (parked.length === 0) return null;
  return html`
    <${Panel} title=${`Parked events (${parked.length})`} id="parked">
      <ul class="parked">${parked.slice(0, 20).map(
        (entry) =>
          html` <li>
            <a
              href="#"
              onClick=${(event) => {
                event.preventDefault();
                onPick(entry.position);
              }}
              >#${entry.position}</a
            >${' '}<span class="muted">${entry.projection} · ${when(entry.parked_at)}</span>
            <div class="error-text">${entry.error}</div>
          </li>`,
      )}</ul>
    </${Panel}>`;
}

const QUARANTINE_PAGE = 20;

function Quarantine() {
  const pages = usePages('quarantine');
  const quarantine = usePoll(
    () => getJson(`/api/v1/quarantine?limit=${QUARANTINE_PAGE}&before=${pages.before ?? 'latest'}`),
    5000,
    [pages.before],
  );
  return html`
    <${Panel} title="Quarantine" id="quarantine" aside=${html`<span class="muted">rejected deliveries</span>`}>
      <${Async} state=${quarantine} what="the quarantine" isEmpty=${(page) => page.data.length === 0 && pages.before === undefined} empty=${html`<${Empty} title="Nothing quarantined">Every delivery so far was a valid webhook event.</${Empty}>`}>
        ${(page) =>
          html`<ul class="quarantine">
              ${page.data.map(
                (entry) =>
                  html` <li>
                    <span class="muted">${when(entry.received_at)}</span>
                    <div class="error-text">${entry.reason}</div>
                    <details>
                      <summary>body</summary>
                      <pre class="payload">${entry.body}</pre>
                    </details>
                  </li>`,
              )}
            </ul>
            <${pages.Pager} next=${page.next_cursor} what="rejections" />`}
      </${Async}>
    </${Panel}>`;
}

import { html } from 'htm/preact';
import { getJson, getRole, tokenStore } from '../api.js';
import { bytes, count, counted, duration, fromNow, when } from '../format.js';
import { Async, Badge, Empty, Panel, Stat, usePoll } from '../ui.js';
import { loadSinksSummary, SinksPanel } from './sinks.js';
import { AuditPanel } from './audit.js';

const REFRESH_MS = 2000;

function connectHref() {
  const token = tokenStore.get();
  return token ? `/auth/connect?api_token=${encodeURIComponent(token)}` : '/auth/connect';
}

export function Overview() {
  const connections = usePoll(() => getJson('/api/v1/connections').then((body) => body.data), REFRESH_MS);
  const projections = usePoll(() => getJson('/api/v1/projections').then((body) => body.data), REFRESH_MS);
  const parked = usePoll(() => getJson('/api/v1/projections/parked').then((body) => body.data), REFRESH_MS);
  const sinks = usePoll(loadSinksSummary, REFRESH_MS);
  // What needs attention is the daemon's verdict (GET /api/v1/status), the one `menu-sync status` prints.
  const status = usePoll(() => getJson('/api/v1/status'), REFRESH_MS);
  // The newest runs, and where the per-store schedule stands (stores done, pending, failing, next due).
  const runs = usePoll(
    () => getJson('/api/v1/reconcile/runs').then((body) => ({ ...body, data: body.data.slice(0, 5) })),
    5000,
  );
  const quarantine = usePoll(() => getJson('/api/v1/quarantine').then((body) => body.data.length), 5000);
  // Write actions are shown to an admin token only; until the role is known, to none.
  const role = usePoll(getRole, 60_000);
  const canWrite = role.data === 'admin';

  const lag = projections.data?.reduce((sum, item) => sum + item.lag, 0);
  const parkedCount = projections.data?.reduce((sum, item) => sum + item.parked, 0);
  const counts = status.data?.counts;
  const retired = new Set(status.data?.connections.filter((item) => item.retired).map((item) => item.id));
  const retrying = status.data?.sinks?.by_state.retrying ?? 0;

  return html` <div class="stats">
      <${Stat}
        label="Connections"
        value=${connections.data ? count(connections.data.length) : '…'}
        tone=${counts === undefined ? '' : counts.connections > 0 ? 'bad' : 'good'}
        hint=${connectionsHint(status.data, retired)}
      />
      <${Stat}
        label="Projector lag"
        value=${lag === undefined ? '…' : count(lag)}
        tone=${lag > 0 ? 'warn' : lag === 0 ? 'good' : ''}
        hint=${lag === 0 ? 'caught up' : 'events behind the log'}
      />
      <${Stat}
        label="Parked events"
        value=${parkedCount === undefined ? '…' : count(parkedCount)}
        tone=${parkedCount > 0 ? 'bad' : parkedCount === 0 ? 'good' : ''}
        hint=${parkedCount > 0 ? 'could not be applied' : 'none'}
      />
      <${Stat}
        label="Sinks"
        value=${sinks.data ? (sinks.data.available ? count(sinks.data.total) : 'n/a') : '…'}
        tone=${counts?.sinks > 0 ? 'bad' : retrying > 0 ? 'warn' : ''}
        hint=${sinksHint(counts, retrying, sinks.data)}
      />
      <${Stat} label="Archive" value=${archiveValue(status.data)} hint=${archiveHint(status.data?.archive)} />
      <${Stat}
        label="Quarantine"
        value=${quarantine.data === undefined ? '…' : count(quarantine.data)}
        tone=${quarantine.data > 0 ? 'warn' : ''}
        hint="rejected deliveries kept"
      />
    </div>
    <${Attention} state=${status} />
    <div class="grid">
      <${Connections} state=${connections} retired=${retired} canWrite=${canWrite} />
      <${Projections} state=${projections} parked=${parked} />
      <${ReconcileRuns} state=${runs} />
      <${SinksPanel} summary=${sinks} canWrite=${canWrite} />
      ${canWrite ? html`<${AuditPanel} />` : null}
    </div>`;
}

function connectionsHint(report, retired) {
  if (report === undefined) return '…';
  const live = report.connections.length - retired.size;
  if (report.counts.connections > 0)
    return live === 0 ? 'none connected' : `${report.counts.connections} need attention`;
  return retired.size > 0 ? `all active, ${retired.size} retired (sandbox)` : 'all active';
}

/** The archived files beyond the log's horizon (docs/reference.md §8): their number. */
function archiveValue(report) {
  if (report === undefined) return '…';
  return report.archive == null ? 'n/a' : counted(report.archive.files, 'file');
}

/** Where the log starts (the horizon) and the archive's size. */
function archiveHint(archive) {
  if (archive === undefined) return '…';
  if (archive == null || archive.files === 0) return 'nothing archived';
  return `${bytes(archive.bytes)}; the log holds positions from ${count(archive.horizon)}, as_of from ${when(archive.as_of_before)}`;
}

/** Red: what status counts as needing attention; yellow: sinks retrying that do not, yet (SINK_ATTENTION_AFTER). */
function sinksHint(counts, retrying, summary) {
  if (counts?.sinks > 0) return `${count(counts.sinks)} need attention`;
  if (retrying > 0) return `${count(retrying)} retrying`;
  return summary?.available === false ? 'not on this daemon' : 'delivering';
}

/** The daemon's list of what needs attention, word for word as `menu-sync status` prints it. */
function Attention({ state }) {
  if (state.data === undefined) return null;
  return html`<section class=${state.data.ok ? 'attention ok' : 'attention bad'} id="attention" role="status">
    ${
      state.data.ok
        ? html`<strong>OK: nothing needs attention</strong>`
        : html`<strong>${state.data.attention.length} thing(s) need attention</strong>
            <ul>
              ${state.data.attention.map((reason) => html`<li>${reason}</li>`)}
            </ul>`
    }
  </section>`;
}

function Connections({ state, retired, canWrite }) {
  return html`
    <${Panel} title="Connections" id="connections" wide aside=${canWrite ? html`<a class="button" href=${connectHref()}>Connect an account</a>` : null}>
      <${Async} state=${state} what="connections"
        empty=${html`<${Empty} title="No account connected">Connect the platform account whose menus should be mirrored.</${Empty}>`}>
        ${(data) =>
          html` <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th>#</th>
                  <th>State</th>
                  <th>Owner</th>
                  <th>Token expires</th>
                  <th>Subscriptions</th>
                  <th>Upstream</th>
                </tr>
              </thead>
              <tbody>
                ${data.map(
                  (item) =>
                    html` <tr>
                      <td>${item.id}</td>
                      <td>
                        ${
                          retired.has(item.id)
                            ? html`<${Badge} value="retired (sandbox)" tone="muted" />`
                            : html`<${Badge}
                                  value=${item.state}
                                />${item.last_error ? html`<div class="error-text">${item.last_error}</div>` : null}`
                        }
                      </td>
                      <td>${item.owner_id ?? html`<span class="muted">not known yet</span>`}</td>
                      <td class="when" title=${when(item.token.expires_at)}>${fromNow(item.token.expires_at)}</td>
                      <td>
                        ${
                          item.subscriptions.length === 0
                            ? html`<span class="muted">none</span>`
                            : item.subscriptions.map(
                                (sub) =>
                                  html`<div>
                                    <${Badge} value=${sub.status} /> ${counted(sub.enabled_events.length, 'event')}${
                                      sub.last_error ? html`<div class="error-text">${sub.last_error}</div>` : null
                                    }
                                  </div>`,
                              )
                        }
                      </td>
                      <td>
                        <span class="mono">${item.base_url}</span
                        >${item.mode === 'emulator' ? html` <${Badge} value="emulator" tone="info" />` : null}
                      </td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`}
      </${Async}>
    </${Panel}>`;
}

function Projections({ state, parked }) {
  return html`
    <${Panel} title="Projections" id="projections">
      <${Async} state=${state} what="projections">
        ${(data) =>
          html` <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th>Name</th>
                  <th>State</th>
                  <th class="num">Position</th>
                  <th class="num">Head</th>
                  <th class="num">Lag</th>
                  <th class="num">Parked</th>
                </tr>
              </thead>
              <tbody>
                ${data.map(
                  (item) =>
                    html` <tr>
                      <td>${item.name}</td>
                      <td><${Badge} value=${item.state} /></td>
                      <td class="num">${count(item.position)}</td>
                      <td class="num">${count(item.head)}</td>
                      <td class="num">
                        ${item.lag > 0 ? html`<strong class="warn-text">${count(item.lag)}</strong>` : '0'}
                      </td>
                      <td class="num">
                        ${item.parked > 0 ? html`<strong class="error-text">${count(item.parked)}</strong>` : '0'}
                      </td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`}
      </${Async}>
      ${
        parked.data?.length > 0
          ? html` <h3>Parked events</h3>
              <ul class="parked">
                ${parked.data.slice(0, 5).map(
                  (entry) =>
                    html` <li>
                      <a href=${`#/events?position=${entry.position}`}>#${entry.position}</a>
                      <span class="muted">${entry.projection}</span>
                      <div class="error-text">${entry.error}</div>
                    </li>`,
                )}
              </ul>
              ${parked.data.length > 5 ? html`<p class="muted">…and ${parked.data.length - 5} more on the <a href="#/events?parked=1">Events</a> page.</p>` : null}`
          : null
      }
    </${Panel}>`;
}

function differences(run) {
  const totals = { created: 0, updated: 0, destroyed: 0 };
  for (const store of run.stores) {
    for (const kind of Object.keys(totals))
      totals[kind] += Object.values(store.differences[kind] ?? {}).reduce((a, b) => a + b, 0);
  }
  const parts = Object.entries(totals)
    .filter(([, n]) => n > 0)
    .map(([kind, n]) => `${n} ${kind}`);
  return parts.length === 0 ? 'no differences' : parts.join(', ');
}

/** Stores done, pending and failing of the per-store schedule, and when the next is due. */
function ReconcileProgress({ body }) {
  const total = body.stores_done + body.stores_pending + body.stores_failing;
  if (!(total > 0)) return null;
  const counts = `Stores: ${count(body.stores_done)} done, ${count(body.stores_pending)} pending, `;
  const failing = html`<span class=${body.stores_failing > 0 ? 'error-text' : ''}
    >${`${count(body.stores_failing)} failing`}</span
  >`;
  const next = body.next_due_at
    ? html`${'; next due '}<span title=${when(body.next_due_at)}>${fromNow(body.next_due_at)}</span>`
    : null;
  return html`<p class="reconcile-progress" id="reconcile-progress">${counts}${failing}${next}</p>`;
}

function ReconcileRuns({ state }) {
  return html`
    <${Panel} title="Recent reconcile runs" id="reconcile">
      ${state.data ? html`<${ReconcileProgress} body=${state.data} />` : null}
      <${Async} state=${state} what="reconcile runs" isEmpty=${(body) => body.data.length === 0}
        empty=${html`<${Empty} title="No reconcile run yet">Reconcile goes over every store once per interval, first those of a new connection, and runs with <span class="mono">menu-sync reconcile</span>.</${Empty}>`}>
        ${({ data }) =>
          html` <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th>#</th>
                  <th>Started</th>
                  <th>Trigger</th>
                  <th>Outcome</th>
                  <th>Differences</th>
                  <th class="num">Appended</th>
                  <th class="num">Took</th>
                </tr>
              </thead>
              <tbody>
                ${data.map(
                  (run) =>
                    html` <tr>
                      <td>${run.id}</td>
                      <td class="when" title=${when(run.started_at)}>${fromNow(run.started_at)}</td>
                      <td>${run.trigger}</td>
                      <td>
                        <${Badge}
                          value=${run.outcome}
                        />${run.errors.length > 0 ? html`<div class="error-text">${run.errors[0]}</div>` : null}
                      </td>
                      <td>${differences(run)}</td>
                      <td class="num">${count(run.stores.reduce((sum, store) => sum + store.events_appended, 0))}</td>
                      <td class="num">${duration(new Date(run.finished_at) - new Date(run.started_at))}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`}
      </${Async}>
    </${Panel}>`;
}

import { html } from 'htm/preact';
import { getJson, tokenStore } from '../api.js';
import { count, fromNow, when } from '../format.js';
import { Async, Badge, Empty, Panel, usePoll } from '../ui.js';

/**
 * Where /auth/callback sends the browser (docs/reference.md §6): what the connect did, read from
 * the page's address (outcome, connection id, a problem's code and text; never a token), then the
 * connection as the API shows it and the stores its first reconcile run went through.
 */

const REFRESH_MS = 2000;

function params() {
  const query = location.hash.split('?')[1] ?? '';
  return new URLSearchParams(query);
}

const ids = (value) => (value ?? '').split(',').filter((item) => /^\d+$/.test(item));

function connectHref() {
  const token = tokenStore.get();
  return token ? `/auth/connect?api_token=${encodeURIComponent(token)}` : '/auth/connect';
}

export function Connected() {
  const query = params();
  const outcome = query.get('outcome');
  if (outcome === 'failed') return html`<${Failed} query=${query} />`;
  const id = Number(query.get('connection'));
  if (!Number.isSafeInteger(id) || id <= 0 || (outcome !== 'created' && outcome !== 'replaced'))
    return html`<${Panel} title="Connect result" id="connect-result" wide>
      <${Empty} title="Nothing to show">This page shows the outcome of connecting an account; start one from the <a href="#/overview">Overview</a>.</${Empty}>
    </${Panel}>`;
  return html`<${Outcome}
    id=${id}
    outcome=${outcome}
    at=${query.get('at')}
    retired=${ids(query.get('retired'))}
    staleEndpoints=${ids(query.get('stale_endpoints'))}
  />`;
}

function Failed({ query }) {
  const status = query.get('status');
  return html`<${Panel} title="Connect result" id="connect-result" wide>
    <div class="state error" role="alert" id="connect-outcome">
      <strong>The account was not connected${status ? ` (HTTP ${status})` : ''}</strong>
      <p>${query.get('detail') ?? 'The callback was refused.'}</p>
      ${query.get('problem') ? html`<p class="muted mono">${query.get('problem')}</p>` : null}
    </div>
    <p class="actions">
      <a class="button primary" href=${connectHref()}>Connect again</a>
      <a class="button" href="#/overview">Back to the overview</a>
    </p>
  </${Panel}>`;
}

function Outcome({ id, outcome, at, retired, staleEndpoints }) {
  const connection = usePoll(
    () => getJson('/api/v1/connections').then((body) => body.data.find((item) => item.id === id) ?? null),
    REFRESH_MS,
  );
  const owner = connection.data?.owner_id;
  const headline =
    outcome === 'created'
      ? `Connected: connection #${id}${owner ? ` for owner ${owner}` : ''}`
      : `Connected again: connection #${id}${owner ? ` of owner ${owner}` : ''} has the new tokens`;
  return html`<${Panel} title="Connect result" id="connect-result" wide>
      <div class="state good" role="status" id="connect-outcome">
        <strong>${headline}</strong>
        <p>
          ${
            outcome === 'created'
              ? 'Its webhook endpoint is registered upstream and its menu is being imported.'
              : 'This owner was connected already: its connection took the new authorization, the tokens it had are dropped, and its webhook subscription is kept, so events still arrive once.'
          }
        </p>
        ${retired.length > 0 ? html`<p class="warn-text">${retiredText(retired, staleEndpoints)}</p>` : null}
      </div>
      <${Async} state=${connection} what="the connection" isEmpty=${(data) => data === null}
        empty=${html`<${Empty} title=${`No connection #${id}`}>It is not among the connections this daemon lists.</${Empty}>`}>
        ${(data) => html`<${Details} connection=${data} />`}
      </${Async}>
      <p class="actions"><a class="button" href="#/overview">Back to the overview</a></p>
    </${Panel}>
    ${connection.data ? html`<${Stores} connection=${connection.data} since=${at} />` : null}`;
}

function retiredText(retired, endpoints) {
  const plural = (n, one, many) => (n > 1 ? many : one);
  const connections = `Retired ${plural(retired.length, 'connection', 'connections')} of the same owner: ${retired.map((item) => `#${item}`).join(', ')}.`;
  if (endpoints.length === 0) return connections;
  const n = endpoints.length;
  return `${connections} Remove webhook ${plural(n, 'endpoint', 'endpoints')} ${endpoints.join(', ')} in the platform's dashboard: the platform offers no call to remove ${plural(n, 'it', 'them')}, and ${plural(n, 'its', 'their')} deliveries now answer 404.`;
}

function Details({ connection }) {
  return html`<dl class="facts" id="connect-details">
    <dt>Owner</dt>
    <dd>${connection.owner_id ?? html`<span class="muted">not known yet: learned from its first webhook</span>`}</dd>
    <dt>State</dt>
    <dd>
      <${Badge}
        value=${connection.state}
      />${connection.last_error ? html` <span class="error-text">${connection.last_error}</span>` : null}
    </dd>
    <dt>Token</dt>
    <dd title=${when(connection.token.expires_at)}>expires ${fromNow(connection.token.expires_at)}</dd>
    <dt>Scopes</dt>
    <dd class="mono">${connection.scopes.join(' ')}</dd>
    <dt>Subscription</dt>
    <dd>
      ${
        connection.subscriptions.length === 0
          ? html`<span class="muted">none</span>`
          : connection.subscriptions.map(
              (sub) =>
                html`<div>
                  <${Badge} value=${sub.status} />
                  ${` ${sub.enabled_events.length} events${sub.upstream_id ? `, upstream endpoint ${sub.upstream_id}` : ''}`}
                  ${sub.last_error ? html`<div class="error-text">${sub.last_error}</div>` : null}
                </div>`,
            )
      }
    </dd>
    <dt>Upstream</dt>
    <dd>
      <span class="mono">${connection.base_url}</span
      >${connection.mode === 'emulator' ? html` <${Badge} value="emulator" tone="info" />` : null}
    </dd>
  </dl>`;
}

/**
 * The newest reconcile run that went through this connection since it was stored (`since`, the
 * daemon's clock, from the page's address): the stores it fetched, or why none.
 */
function Stores({ connection, since }) {
  const after = Date.parse(since ?? '') || 0;
  const runs = usePoll(
    () =>
      getJson('/api/v1/reconcile/runs?limit=20').then((body) => {
        const run = body.data.find(
          (item) =>
            Date.parse(item.started_at) >= after &&
            (item.stores.some((store) => store.connection_id === connection.id) ||
              item.notes.some((note) => note.startsWith(`connection ${connection.id}:`))),
        );
        return run ?? null;
      }),
    REFRESH_MS,
    [connection.id],
  );
  return html`<${Panel} title="Stores" id="connect-stores" wide>
    <${Async} state=${runs} what="reconcile runs" isEmpty=${(data) => data === null}
      empty=${html`<${Empty} title="Importing the menu…">The reconcile run this connect started has not reported yet.</${Empty}>`}>
      ${(run) => {
        const stores = run.stores.filter((store) => store.connection_id === connection.id);
        const notes = run.notes.filter((note) => note.startsWith(`connection ${connection.id}:`));
        return html`<p class="muted">
            Reconcile run #${run.id} (${run.trigger}, <${Badge} value=${run.outcome} />) ${fromNow(run.finished_at)}.
          </p>
          ${
            stores.length === 0
              ? html`<${Empty} title="No store known yet">${notes[0] ?? 'List the stores in STORE_IDS, or they are learned from the first order event.'}</${Empty}>`
              : html`<div class="table-wrap">
                  <table>
                    <thead>
                      <tr>
                        <th>Store</th>
                        <th class="num">Collections</th>
                        <th class="num">Products</th>
                        <th class="num">Traits</th>
                        <th class="num">Trait options</th>
                        <th class="num">Orders</th>
                        <th class="num">Events appended</th>
                        <th>Errors</th>
                      </tr>
                    </thead>
                    <tbody>
                      ${stores.map(
                        (store) =>
                          html`<tr>
                            <td class="mono">${store.store_id}</td>
                            <td class="num">${count(store.checked.collection ?? 0)}</td>
                            <td class="num">${count(store.checked.product ?? 0)}</td>
                            <td class="num">${count(store.checked.trait ?? 0)}</td>
                            <td class="num">${count(store.checked.trait_option ?? 0)}</td>
                            <td class="num">${count(store.checked.order ?? 0)}</td>
                            <td class="num">${count(store.events_appended)}</td>
                            <td>
                              ${store.errors.length === 0 ? html`<span class="muted">none</span>` : html`<span class="error-text">${store.errors[0]}</span>`}
                            </td>
                          </tr>`,
                      )}
                    </tbody>
                  </table>
                </div>`
          }`;
      }}
    </${Async}>
  </${Panel}>`;
}

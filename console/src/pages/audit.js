import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { ApiError, getJson } from '../api.js';
import { count, fromNow, when } from '../format.js';
import { Async, Empty, Panel, usePoll } from '../ui.js';

const REFRESH_MS = 5000;
/** Entries shown at first, and added by "Show more". */
const PAGE = 25;

/** The newest `shown` entries, a page at a time; a daemon without /api/v1/audit answers 404: not available. */
async function loadAudit(shown) {
  try {
    const data = [];
    let before = null;
    do {
      const query = new URLSearchParams({ limit: String(Math.min(1000, shown - data.length)) });
      if (before) query.set('before', before);
      const page = await getJson(`/api/v1/audit?${query}`);
      data.push(...page.data);
      before = page.next_cursor;
    } while (before && data.length < shown);
    return { available: true, data, more: before !== null };
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return { available: false, data: [] };
    throw error;
  }
}

/** The audit log (docs/reference.md §12), newest first: who changed what, from where. Admin tokens only. */
export function AuditPanel() {
  const [shown, setShown] = useState(PAGE);
  const entries = usePoll(() => loadAudit(shown), REFRESH_MS, [shown]);
  return html`
    <${Panel} title="Audit log" id="audit" wide>
      <${Async} state=${entries} what="the audit log" isEmpty=${(data) => data.data.length === 0}
        empty=${
          entries.data?.available === false
            ? html`<${Empty} title="No audit log on this daemon">This version serves no <span class="mono">/api/v1/audit</span>.</${Empty}>`
            : html`<${Empty} title="Nothing changed yet">Every write of the API or the CLI that changes something (sinks, tokens, connections, replays, reconcile runs) is listed here.</${Empty}>`
        }>
        ${(data) =>
          html` <div class="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th>When</th>
                    <th>Action</th>
                    <th>Target</th>
                    <th>By</th>
                    <th>From</th>
                  </tr>
                </thead>
                <tbody>
                  ${data.data.map(
                    (entry) =>
                      html` <tr>
                        <td class="when" title=${when(entry.at)}>${fromNow(entry.at)}</td>
                        <td class="mono">${entry.action}</td>
                        <td class="mono">${entry.target}</td>
                        <td title=${entry.token.id}>${entry.token.name}</td>
                        <td class="mono">${entry.remote_address ?? html`<span class="muted">—</span>`}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>
            ${
              data.more
                ? html`<p class="more">
                    <button type="button" onClick=${() => setShown(shown + PAGE)}>Show more entries</button>
                    <span class="muted"> ${count(data.data.length)} shown</span>
                  </p>`
                : null
            }`}
      </${Async}>
    </${Panel}>`;
}

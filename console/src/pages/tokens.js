import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { deleteJson, getJson, getRole, postJson } from '../api.js';
import { fromNow, when } from '../format.js';
import { Async, Badge, Empty, Panel, usePoll } from '../ui.js';

const REFRESH_MS = 5000;

/** Every stored token, a page of 1000 at a time (docs/reference.md §12); never their secrets. */
async function loadTokens() {
  const data = [];
  let after = null;
  do {
    const page = await getJson(`/api/v1/tokens?limit=1000${after ? `&after=${after}` : ''}`);
    data.push(...page.data);
    after = page.next_cursor;
  } while (after);
  return data;
}

const list = (text) =>
  text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');

/** Makes a token; its secret is shown here once, until the panel is left. */
function NewToken({ made }) {
  const [form, setForm] = useState({ name: '', role: 'read', owners: '', expires: '' });
  const [error, setError] = useState();
  const [secret, setSecret] = useState();
  const set = (field) => (event) => setForm({ ...form, [field]: event.currentTarget.value });
  const submit = async (event) => {
    event.preventDefault();
    setError(undefined);
    const body = { name: form.name, role: form.role };
    if (form.role === 'read' && list(form.owners).length > 0) body.owner_ids = list(form.owners);
    if (form.expires !== '') body.expires_at = new Date(form.expires).toISOString();
    try {
      const data = await postJson('/api/v1/tokens', body);
      setSecret({ name: data.name, token: data.token });
      setForm({ name: '', role: 'read', owners: '', expires: '' });
      made();
    } catch (failure) {
      setError(failure.message);
    }
  };
  return html`<form class="new-token" onSubmit=${submit}>
    <input aria-label="Name" placeholder="Name (who holds it)" required value=${form.name} onInput=${set('name')} />
    <select aria-label="Role" value=${form.role} onChange=${set('role')}>
      <option value="read">read</option>
      <option value="admin">admin</option>
    </select>
    <input
      aria-label="Owners"
      placeholder="Owners (comma-separated; default every owner)"
      value=${form.owners}
      disabled=${form.role !== 'read'}
      onInput=${set('owners')}
    />
    <input aria-label="Expires at" type="datetime-local" value=${form.expires} onInput=${set('expires')} />
    <button type="submit" class="primary">Make token</button>
    ${error ? html`<div class="error-text" role="alert">${error}</div>` : null}
    ${
      secret
        ? html`<div class="new-secret" role="status">
            Token <strong>${secret.name}</strong>: copy it now, it is not shown again.
            <code class="mono secret">${secret.token}</code>
          </div>`
        : null
    }
  </form>`;
}

/** Tokens kept in the database: for admin tokens only (a read token is refused /api/v1/tokens). */
export function Tokens() {
  const role = usePoll(getRole, 60_000);
  const [generation, setGeneration] = useState(0);
  const tokens = usePoll(loadTokens, REFRESH_MS, [generation]);
  if (role.data === 'read')
    return html`<${Panel} title="Tokens" id="tokens" wide>
      <${Empty} title="Tokens are for admin tokens">This tab's token may only read.</${Empty}>
    </${Panel}>`;
  const revoke = async (token) => {
    if (!confirm(`Revoke token ${token.name}? Every process refuses it within seconds.`)) return;
    await deleteJson(`/api/v1/tokens/${token.id}`).catch((error) => alert(`Revoke refused: ${error.message}`));
    setGeneration(generation + 1);
  };
  return html`<${Panel} title="Tokens" id="tokens" wide>
    <${NewToken} made=${() => setGeneration(generation + 1)} />
    <${Async} state=${tokens} what="tokens"
      empty=${html`<${Empty} title="No stored tokens">Make one above or with <span class="mono">menu-sync tokens add</span>; API_TOKENS entries are not listed.</${Empty}>`}>
      ${(data) =>
        html`<div class="table-wrap">
          <table class="tokens">
            <thead>
              <tr>
                <th>Name</th>
                <th>Role</th>
                <th>Owners</th>
                <th>Expires</th>
                <th>Last used</th>
                <th>Made</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              ${data.map(
                (token) =>
                  html`<tr key=${token.id} class="token" data-id=${token.id}>
                    <td title=${token.id}>${token.name}</td>
                    <td><${Badge} value=${token.role} tone=${token.role === 'admin' ? 'warn' : 'good'} /></td>
                    <td class="mono">
                      ${token.owner_ids === null ? html`<span class="muted">every owner</span>` : token.owner_ids.join(', ')}
                    </td>
                    <td title=${when(token.expires_at)}>${token.expires_at ? fromNow(token.expires_at) : '—'}</td>
                    <td title=${when(token.last_used_at)}>
                      ${token.last_used_at ? fromNow(token.last_used_at) : 'never'}
                    </td>
                    <td title=${when(token.created_at)}>${fromNow(token.created_at)}</td>
                    <td class="actions"><button type="button" onClick=${() => revoke(token)}>Revoke</button></td>
                  </tr>`,
              )}
            </tbody>
          </table>
        </div>`}
    </${Async}>
  </${Panel}>`;
}

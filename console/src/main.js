import { html, render } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { onUnauthorized, tokenStore } from './api.js';
import { Connected } from './pages/connected.js';
import { Events } from './pages/events.js';
import { Menu } from './pages/menu.js';
import { Overview } from './pages/overview.js';
import { Tokens } from './pages/tokens.js';
import { startSampling } from './sampler.js';
import { ErrorBox, Loading } from './ui.js';
import './style.css';

/** The charting library is loaded with the Activity page only: the other pages start without it. */
function lazyPage(load, what) {
  let loaded;
  return function LazyPage() {
    const [state, setState] = useState({ component: loaded, error: undefined });
    useEffect(() => {
      if (loaded) return;
      load().then(
        (component) => {
          loaded = component;
          setState({ component });
        },
        (error) => setState({ error }),
      );
    }, []);
    if (state.error) return html`<${ErrorBox} error=${state.error} what=${`Could not load ${what}`} />`;
    return state.component ? html`<${state.component} />` : html`<${Loading} what=${`Loading ${what}`} />`;
  };
}

const Activity = lazyPage(() => import('./pages/activity.js').then((module) => module.Activity), 'the charts');

const PAGES = [
  { path: 'overview', title: 'Overview', component: Overview },
  { path: 'menu', title: 'Menu', component: Menu },
  { path: 'events', title: 'Events', component: Events },
  { path: 'activity', title: 'Activity', component: Activity },
  { path: 'tokens', title: 'Tokens', component: Tokens },
  { path: 'connected', title: 'Connect result', component: Connected, hidden: true },
];

const currentPath = () => location.hash.replace(/^#\/?/, '').split('?')[0] || 'overview';

function useRoute() {
  const [path, setPath] = useState(currentPath());
  useEffect(() => {
    const update = () => setPath(currentPath());
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, []);
  return path;
}

/** Asked when /api answers 401: the token is kept for this tab only (sessionStorage). */
function TokenPrompt({ onSaved }) {
  const [value, setValue] = useState('');
  const had = tokenStore.get() !== null;
  return html` <div class="token-prompt">
    <form
      onSubmit=${(event) => {
        event.preventDefault();
        tokenStore.set(value.trim());
        onSaved();
      }}
    >
      <h2>API token</h2>
      <p>
        ${had ? 'The daemon refused the token this tab had.' : 'This daemon asks for a token (one of API_TOKENS, or one made under Tokens) for its API.'}
        ${'It is kept for this tab only.'}
      </p>
      <input
        type="password"
        autocomplete="current-password"
        value=${value}
        onInput=${(event) => setValue(event.currentTarget.value)}
        placeholder="API token"
        required
        minlength="16"
        autofocus
      />
      <button type="submit" class="primary">Open the console</button>
    </form>
  </div>`;
}

function App() {
  const path = useRoute();
  const [needsToken, setNeedsToken] = useState(false);
  const [session, setSession] = useState(0);
  useEffect(() => onUnauthorized(() => setNeedsToken(true)), []);
  const page = PAGES.find((item) => item.path === path) ?? PAGES[0];
  useEffect(() => {
    document.title = `${page.title} · menu-sync`;
  }, [page]);
  return html` <header class="top">
      <a class="brand" href="#/overview"><span class="logo">▤</span> menu-sync</a>
      <nav>
        ${PAGES.filter((item) => !item.hidden).map((item) => html`<a href=${`#/${item.path}`} class=${item === page ? 'active' : ''} aria-current=${item === page ? 'page' : undefined}>${item.title}</a>`)}
      </nav>
      <span class="spacer"></span>
      ${
        tokenStore.get()
          ? html`<button
              type="button"
              class="link"
              onClick=${() => {
                tokenStore.clear();
                location.reload();
              }}
            >
              Forget token
            </button>`
          : null
      }
      <a class="link" href="/api/docs" target="_blank" rel="noopener">API docs</a>
    </header>
    <main key=${session}>
      ${
        needsToken
          ? html`<${TokenPrompt}
              onSaved=${() => {
                setNeedsToken(false);
                setSession(session + 1);
              }}
            />`
          : html`<${page.component} />`
      }
    </main>`;
}

startSampling();
const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);

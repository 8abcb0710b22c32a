import { html } from 'htm/preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { getJson } from '../api.js';
import { counted, when } from '../format.js';
import { diffMenus, show } from '../menu-diff.js';
import { Async, Badge, Empty, ErrorBox, Loading, Panel, usePoll } from '../ui.js';

const STEPS = 1000;

/**
 * The span a slider covers: the owner's first event (or the oldest `as_of` the archive leaves,
 * docs/reference.md §8, when later) to now; the right end means "live".
 */
function useSpan(owner, asOfFrom) {
  return useMemo(() => {
    if (!owner) return undefined;
    const last = Math.max(Date.now(), new Date(owner.last_occurred_at).getTime());
    const first = Math.min(
      Math.max(new Date(owner.first_occurred_at).getTime(), asOfFrom ? new Date(asOfFrom).getTime() : -Infinity),
      last,
    );
    return { first, last };
  }, [owner?.owner_id, owner?.first_occurred_at, owner?.last_occurred_at, asOfFrom]);
}

/** The oldest `as_of` answered (null: nothing archived, or a token the status report refuses). */
const loadAsOfFrom = () =>
  getJson('/api/v1/status').then(
    (report) => report.archive?.as_of_before ?? null,
    () => null,
  );

const atStep = (span, step) => new Date(span.first + ((span.last - span.first) * step) / STEPS);

function useDebounced(value, ms) {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value]);
  return settled;
}

const menuUrl = (owner, asOf) =>
  `/api/v1/menu?owner_id=${encodeURIComponent(owner)}${asOf ? `&as_of=${encodeURIComponent(asOf.toISOString())}` : ''}`;

function TimeSlider({ id, label, span, step, onStep }) {
  const live = step === STEPS;
  return html` <label class="slider" for=${id}>
    <span class="slider-label"
      >${label}:${' '}<strong data-testid=${`${id}-label`}
        >${live ? 'now (live)' : when(atStep(span, step).toISOString())}</strong
      ></span
    >
    <input
      id=${id}
      type="range"
      min="0"
      max=${STEPS}
      value=${step}
      data-first=${span.first}
      data-last=${span.last}
      onInput=${(event) => onStep(Number(event.currentTarget.value))}
    />
    <span class="slider-ends"><span>${when(new Date(span.first).toISOString())}</span><span>now</span></span>
  </label>`;
}

export function Menu() {
  const owners = usePoll(() => getJson('/api/v1/owners').then((body) => body.data), 10000);
  const [ownerId, setOwnerId] = useState();
  const owner = owners.data?.find((item) => item.owner_id === ownerId) ?? owners.data?.[0];
  const asOfFrom = usePoll(loadAsOfFrom, 10000);
  const span = useSpan(owner, asOfFrom.data);
  const [step, setStep] = useState(STEPS);
  const settledStep = useDebounced(step, 200);

  if (owners.data === undefined)
    return owners.error
      ? html`<${ErrorBox} error=${owners.error} what="Could not load the owners" />`
      : html`<${Loading} what="Loading the owners" />`;
  if (owners.data.length === 0) {
    return html`<${Empty} title="No menu mirrored yet">Once an account is connected and its first events arrive, its menu shows here.</${Empty}>`;
  }
  return html` <div class="toolbar">
      <label
        >Owner
        <select
          value=${owner.owner_id}
          onChange=${(event) => {
            setOwnerId(event.currentTarget.value);
            setStep(STEPS);
          }}
        >
          ${owners.data.map((item) => html`<option value=${item.owner_id}>${item.owner_id} (${item.events} events)</option>`)}
        </select>
      </label>
      <${TimeSlider} id="as-of" label="Menu as of" span=${span} step=${step} onStep=${setStep} />
      ${step !== STEPS ? html`<button type="button" onClick=${() => setStep(STEPS)}>Back to live</button>` : null}
    </div>
    <div class="menu-layout">
      <${MenuView} owner=${owner.owner_id} asOf=${settledStep === STEPS ? undefined : atStep(span, settledStep)} />
      <${Changes} owner=${owner.owner_id} span=${span} />
    </div>`;
}

function MenuView({ owner, asOf }) {
  const menu = usePoll(() => getJson(menuUrl(owner, asOf)), asOf ? 0 : 2000, [owner, asOf?.getTime()]);
  return html`
    <${Panel} title=${asOf ? `Menu as of ${when(asOf.toISOString())}` : 'Menu now'} id="menu"
      aside=${asOf ? html`<${Badge} value="history" tone="info" />` : html`<${Badge} value="live" tone="good" />`}>
      <${Async} state=${menu} what="the menu" isEmpty=${(data) => data.collections.length === 0 && data.products.length === 0}
        empty=${html`<${Empty} title=${asOf ? 'Nothing yet at that instant' : 'The menu is empty'}>${asOf ? 'Move the slider to the right.' : 'No live collection or product.'}</${Empty}>`}>
        ${(data) => html`<${Collections} menu=${data} />`}
      </${Async}>
    </${Panel}>`;
}

function Collections({ menu }) {
  const byId = new Map(menu.products.map((product) => [product.id, product]));
  const placed = new Set();
  const sections = menu.collections.map((collection) => {
    const products = (collection.relationships?.products?.data ?? []).map((ref) => byId.get(ref.id)).filter(Boolean);
    products.forEach((product) => placed.add(product.id));
    return {
      key: collection.id,
      title: collection.attributes.title ?? `Collection ${collection.id}`,
      description: collection.attributes.description,
      products,
    };
  });
  const loose = menu.products.filter((product) => !placed.has(product.id));
  if (loose.length > 0)
    sections.push({
      key: 'loose',
      title: 'Not in a collection',
      description: 'Live products no collection lists',
      products: loose,
    });
  return html`${sections.map(
    (section) =>
      html` <div class="collection">
        <h3>${section.title}${' '}<span class="muted">${counted(section.products.length, 'product')}</span></h3>
        ${section.description ? html`<p class="muted">${section.description}</p>` : null}
        <div class="products">${section.products.map((product) => html`<${Product} product=${product} />`)}</div>
      </div>`,
  )}`;
}

function Prices({ value }) {
  if (!value || typeof value !== 'object') return null;
  return html`<span class="prices">${show(value)}</span>`;
}

function Product({ product }) {
  const { title, description, available, base_cost: cost } = product.attributes;
  return html` <article class="product" data-product-id=${product.id}>
    <div class="product-head">
      <strong class="product-title">${title ?? `Product ${product.id}`}</strong>
      <${Prices} value=${cost} />
    </div>
    ${description ? html`<p class="muted">${description}</p>` : null}
    ${available === false ? html`<${Badge} value="unavailable" tone="bad" />` : null}
    ${(product.traits ?? []).map(
      (trait) =>
        html` <details class="trait">
          <summary>
            ${trait.attributes.title} ${trait.attributes.required ? html`<span class="muted">required</span>` : null}
            ${trait.attributes.allow_multiple ? html`<span class="muted">· pick several</span>` : null}
          </summary>
          <ul>
            ${(trait.trait_options ?? []).map(
              (option) =>
                html` <li class=${option.attributes.available === false ? 'unavailable' : ''}>
                  ${option.attributes.title}
                  <${Prices} value=${option.attributes.cost_adjustment} />
                  ${option.attributes.available === false ? html` <${Badge} value="unavailable" tone="bad" />` : null}
                </li>`,
            )}
          </ul>
        </details>`,
    )}
  </article>`;
}

function Changes({ owner, span }) {
  const [fromStep, setFromStep] = useState(0);
  const [toStep, setToStep] = useState(STEPS);
  const from = useDebounced(fromStep, 200);
  const to = useDebounced(toStep, 200);
  const diff = usePoll(
    async () => {
      const [before, after] = await Promise.all([
        getJson(menuUrl(owner, atStep(span, from))),
        getJson(menuUrl(owner, to === STEPS ? undefined : atStep(span, to))),
      ]);
      return diffMenus(before, after);
    },
    to === STEPS ? 3000 : 0,
    [owner, from, to, span.first],
  );
  return html`
    <${Panel} title="What changed" id="changes">
      <${TimeSlider} id="diff-from" label="From" span=${span} step=${fromStep} onStep=${setFromStep} />
      <${TimeSlider} id="diff-to" label="To" span=${span} step=${toStep} onStep=${setToStep} />
      <${Async} state=${diff} what="the changes" isEmpty=${(data) => data.added.length + data.removed.length + data.changed.length === 0}
        empty=${html`<${Empty} title="No change between these instants" />`}>
        ${(data) =>
          html`<div class="diff" data-testid="diff">
            ${
              data.added.length > 0
                ? html`<h3>Added <span class="muted">${data.added.length}</span></h3>
                    <ul class="diff-list">
                      ${data.added.map((item) => html`<li class="added"><span class="kind">${item.label}</span> ${item.title}</li>`)}
                    </ul>`
                : null
            }
            ${
              data.removed.length > 0
                ? html`<h3>Removed <span class="muted">${data.removed.length}</span></h3>
                    <ul class="diff-list">
                      ${data.removed.map((item) => html`<li class="removed"><span class="kind">${item.label}</span> ${item.title}</li>`)}
                    </ul>`
                : null
            }
            ${
              data.changed.length > 0
                ? html`<h3>Changed <span class="muted">${data.changed.length}</span></h3>
                    <ul class="diff-list">
                      ${data.changed.map(
                        (item) =>
                          html`<li class="changed">
                            <span class="kind">${item.label}</span> ${item.title}
                            <ul>
                              ${item.changes.map((change) => html`<li><span class="field">${change.field}</span> <del>${change.before}</del> → <ins>${change.after}</ins></li>`)}
                            </ul>
                          </li>`,
                      )}
                    </ul>`
                : null
            }
          </div>`}
      </${Async}>
    </${Panel}>`;
}

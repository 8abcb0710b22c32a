import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { Browser, launchBrowser } from './support/browser.js';
import { DaemonProcess, stopLeftovers } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';

type Json = any;

/**
 * What the console shows, read as the browser renders it (innerText): a count and its noun, a
 * label and its value, keep the space between them (issue 41: "14events", "Breakfast7 products",
 * "as of:now"). htm drops whitespace that holds a line break, so a template split across lines
 * glues them; these pages are read against the zero-config sandbox.
 */
describe('the console keeps the spaces between counts, labels and values', () => {
  const DEMO_OWNER = '4001';
  let dir: string;
  let daemon: DaemonProcess;
  let browser: Browser;
  let page: Page;

  const api = async (pathname: string, init: RequestInit = {}) => {
    const response = await fetch(`${daemon.url}${pathname}`, init);
    return { status: response.status, json: (await response.json().catch(() => undefined)) as Json };
  };
  const open = (route: string) =>
    page.evaluate((hash) => {
      (globalThis as Json).location.hash = hash;
    }, `#/${route}`);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-console-text-'));
    await chmod(dir, 0o755);
    daemon = await DaemonProcess.start({
      cwd: dir,
      env: { HOST: '127.0.0.1', SINK_ALLOWED_NETWORKS: '127.0.0.0/8' },
      readyTimeoutMs: 90_000,
    });
    await eventually(
      async () => expect((await api(`/api/v1/products?owner_id=${DEMO_OWNER}&limit=1000`)).json.data).toHaveLength(30),
      30_000,
      200,
    );
    browser = await launchBrowser();
    page = await browser.context.newPage();
    await page.goto(`${daemon.url}/console/`);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await DaemonProcess.killAll('SIGKILL');
    if (dir === undefined) return;
    await stopLeftovers(dir);
    await rm(dir, { recursive: true, force: true });
  });

  it("Overview: a subscription's status, then its count of events", async () => {
    const [connection] = (await api('/api/v1/connections')).json.data;
    const [subscription] = connection.subscriptions;
    const cell = page.locator('#connections tbody tr td div', { hasText: 'events' }).first();
    await cell.waitFor();
    expect(await cell.innerText()).toBe(`${subscription.status} ${subscription.enabled_events.length} events`);
    expect(subscription.enabled_events).toHaveLength(14);
  });

  it('Overview: the sinks furthest behind, each id then its lag in brackets', async () => {
    // A target that refuses every connection: the sink stays behind by every change the log keeps.
    const created = await api('/api/v1/sinks', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'http', url: 'http://127.0.0.1:9/refused', from: 'start' }),
    });
    expect(created.status).toBe(201);
    const lagging = page.locator('.sink-counts .most-lagging', { hasText: created.json.data.id.slice(0, 8) });
    await lagging.waitFor({ timeout: 20_000 });
    const text = await lagging.innerText();
    expect(text).toMatch(/^Most behind:( [0-9a-f]{8} \(\d[\d,]*\+?\))+$/);
    expect(text).toContain(` ${created.json.data.id.slice(0, 8)} (`);
  });

  it("Menu: the slider's label and its value; each collection's title, then its count of products", async () => {
    await open('menu');
    const label = page.locator('.slider-label').first();
    await label.waitFor();
    expect(await label.innerText()).toBe('Menu as of: now (live)');
    const menu = (await api(`/api/v1/menu?owner_id=${DEMO_OWNER}`)).json;
    const first = menu.collections[0];
    const products = first.relationships.products.data.filter((ref: Json) =>
      menu.products.some((product: Json) => product.id === ref.id),
    ).length;
    const heading = page.locator('#menu .collection h3').first();
    await heading.waitFor();
    expect(await heading.innerText()).toBe(
      `${first.attributes.title} ${products} ${products === 1 ? 'product' : 'products'}`,
    );
    expect(products).toBeGreaterThan(1);
  });
});

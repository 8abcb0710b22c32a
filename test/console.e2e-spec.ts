import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { ARTIFACTS_DIR, Browser, launchBrowser } from './support/browser.js';
import { DaemonProcess, stopLeftovers } from './support/daemon-process.js';
import { eventually } from './support/eventually.js';
import { menuEvent, product } from './support/menu-events.js';

/**
 * The operator's console (issue 15) in Debian's chromium, against the zero-config sandbox with an
 * API token set: the token is asked once; each page opens; the connection's state shows; a product
 * made through the emulator appears on the Menu page without a reload; the time slider shows its
 * earlier title after a PATCH, and the diff names the change; a parked event is shown with its
 * error. Screenshots of each page go to test/artifacts/ (git-ignored); first paint is measured.
 */

const FIRST_READY_MS = 90_000;
const DEMO_OWNER = '4001';
const TOKEN = 'console-test-token-0123456789abcdef';
const READ_TOKEN = 'console-test-read-token-0123456789abcdef';
const WEBHOOK_KEY = 'console-test-webhook-key-0123456789';

type Json = any;

describe('the console at /console, in a browser, against the sandbox', () => {
  let dir: string;
  let daemon: DaemonProcess;
  let emulator: string;
  let browser: Browser;
  let page: Page;
  /** Positions of the product.created and product.updated events of the Menu test's product. */
  let soupEvents: number[] = [];

  const api = async (pathname: string, init: RequestInit = {}) => {
    const response = await fetch(`${daemon.url}${pathname}`, {
      ...init,
      headers: { authorization: `Bearer ${TOKEN}`, ...init.headers },
    });
    return { status: response.status, json: (await response.json().catch(() => undefined)) as Json };
  };
  const control = async (method: string, pathname: string, body?: Json) => {
    const response = await fetch(`${emulator}/_emulator/${pathname}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, json: (await response.json().catch(() => undefined)) as Json };
  };
  const shot = (name: string) =>
    page.screenshot({ path: path.join(ARTIFACTS_DIR, `console-${name}.png`), fullPage: true });
  const open = async (route: string) => {
    await page.evaluate((hash) => {
      (globalThis as Json).location.hash = hash;
    }, `#/${route}`);
  };
  /** Moves a time slider to the step nearest `instant` (its span is on the element) and lets the page react. */
  const slideTo = async (id: string, instant: number) =>
    page.locator(`#${id}`).evaluate((input: Json, target) => {
      const first = Number(input.dataset.first);
      const last = Number(input.dataset.last);
      input.value = String(Math.round(((target - first) / (last - first)) * Number(input.max)));
      input.dispatchEvent(new Event('input', { bubbles: true }));
      return { first, last, value: input.value };
    }, instant);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-console-'));
    await chmod(dir, 0o755);
    daemon = await DaemonProcess.start({
      cwd: dir,
      env: {
        API_TOKENS: `${TOKEN},read:${READ_TOKEN}`,
        WEBHOOK_KEYS: WEBHOOK_KEY,
        SINK_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128',
      },
      readyTimeoutMs: FIRST_READY_MS,
    });
    const [connection] = await eventually(
      async () => {
        const listed = (await api('/api/v1/connections')).json.data;
        expect(listed).toEqual([expect.objectContaining({ state: 'active', owner_id: DEMO_OWNER })]);
        return listed;
      },
      30_000,
      200,
    );
    emulator = connection.base_url;
    await eventually(
      async () => expect((await api(`/api/v1/products?owner_id=${DEMO_OWNER}&limit=1000`)).json.data).toHaveLength(30),
      30_000,
      200,
    );
    browser = await launchBrowser();
    page = await browser.context.newPage();
  }, FIRST_READY_MS + 60_000);

  afterAll(async () => {
    await browser?.close();
    await DaemonProcess.killAll('SIGKILL');
    if (dir === undefined) return;
    await stopLeftovers(dir);
    await rm(dir, { recursive: true, force: true });
  });

  it("/ leads to the console, which asks for the API token once, then shows the connection's state (first paint measured)", async () => {
    await page.goto(`${daemon.url}/`);
    expect(new URL(page.url()).pathname).toBe('/console/');
    await page.getByPlaceholder('API token').waitFor();
    // Read once the browser has recorded it: read right after goto(), the entry was sometimes not there yet.
    await page.waitForFunction(
      () =>
        (performance as Json).getEntriesByType('paint').some((entry: Json) => entry.name === 'first-contentful-paint'),
      undefined,
      { timeout: 10_000 },
    );
    const paint = await page.evaluate(() =>
      Object.fromEntries(
        (performance as Json).getEntriesByType('paint').map((entry: Json) => [entry.name, Math.round(entry.startTime)]),
      ),
    );
    await shot('token');
    await page.getByPlaceholder('API token').fill(TOKEN);
    await page.getByRole('button', { name: 'Open the console' }).click();
    const connections = page.locator('#connections tbody tr');
    await connections.first().waitFor();
    await expect(connections.first().textContent()).resolves.toMatch(/^1active4001/);
    await page.locator('#reconcile tbody tr').first().waitFor();
    // The per-store schedule: the demo store reconciled, its next turn hours away (RECONCILE_INTERVAL 6 h).
    const progress = /^Stores: 1 done, 0 pending, 0 failing; next due in [3-9] hours$/;
    await page.locator('#reconcile-progress', { hasText: progress }).waitFor({ timeout: 15_000 });
    await expect(page.locator('#reconcile-progress').textContent()).resolves.toMatch(progress);
    await page.locator('#projections tbody tr').first().waitFor();
    // The sinks come from a request of their own, which may still be under way ("Loading sinks…").
    const sinksShown = /Sinks are not available on this daemon|No sinks yet|Target/;
    await page.locator('#sinks', { hasText: sinksShown }).waitFor();
    await expect(page.locator('#sinks').textContent()).resolves.toMatch(sinksShown);
    // The sandbox's catalogue sink: its newest delivery attempts are shown beside it (docs/reference.md §12).
    const attempt = page.locator('#sinks table.attempts tbody tr').first();
    await attempt.waitFor({ timeout: 20_000 });
    await expect(attempt.locator('td').nth(1).textContent()).resolves.toBe('ok');
    await expect(attempt.locator('td').nth(2).textContent()).resolves.toBe('204');
    expect(await page.getByRole('link', { name: 'Connect an account' }).getAttribute('href')).toBe(
      `/auth/connect?api_token=${TOKEN}`,
    );
    await shot('overview');

    // A reload keeps the token for the tab, and measures a warm start.
    await page.reload();
    await page.locator('#connections tbody tr').first().waitFor();
    const warm = await page.evaluate(() => ({
      firstContentfulPaint: Math.round(
        (performance as Json).getEntriesByType('paint').find((entry: Json) => entry.name === 'first-contentful-paint')
          ?.startTime ?? -1,
      ),
      connectionsShownAt: Math.round(performance.now()),
    }));
    // Five more reloads: the median says more than one sample on a shared machine.
    const reloads: number[] = [];
    for (let i = 0; i < 5; i++) {
      await page.reload();
      await page.locator('#connections tbody tr').first().waitFor();
      reloads.push(
        await page.evaluate(() =>
          Math.round(
            (performance as Json)
              .getEntriesByType('paint')
              .find((entry: Json) => entry.name === 'first-contentful-paint')?.startTime ?? -1,
          ),
        ),
      );
    }
    const median = [...reloads].sort((a, b) => a - b)[2];
    process.stdout.write(
      `console first paint (cold): ${JSON.stringify(paint)}; warm reload: ${JSON.stringify(warm)}; ` +
        `first-contentful-paint of 5 reloads: ${reloads.join(', ')} ms (median ${median} ms)\n`,
    );
    expect(paint['first-contentful-paint']).toBeGreaterThan(0);
  }, 60_000);

  it('Menu: a product made through the emulator appears without a reload; the slider shows its earlier title; the diff names the change', async () => {
    await open('menu');
    await page.getByText('Full English').first().waitFor();
    await shot('menu');

    const created = await control('POST', 'products', {
      attributes: { title: 'Soup of the day', base_cost: { GBP: 650 } },
    });
    expect(created.status).toBe(201);
    const card = page.locator(`#menu [data-product-id="${created.json.id}"]`);
    await card.waitFor({ timeout: 20_000 });
    await expect(card.locator('.product-title').textContent()).resolves.toBe('Soup of the day');

    expect(
      (await control('PATCH', `products/${created.json.id}`, { attributes: { title: 'Soup of the week' } })).status,
    ).toBe(200);
    await page
      .locator(`#menu [data-product-id="${created.json.id}"] .product-title`, { hasText: 'Soup of the week' })
      .waitFor({ timeout: 20_000 });

    const events = (await api(`/api/v1/events?subject_type=product&subject_id=${created.json.id}`)).json.data;
    soupEvents = events.map((event: Json) => event.position);
    expect(events.map((event: Json) => event.event_type)).toEqual(['product.created', 'product.updated']);
    const [createdAt, updatedAt] = events.map((event: Json) => Date.parse(event.occurred_at));
    // The owner list (and so the slider's span) is refreshed every 10 s: wait until it covers the update.
    await eventually(
      async () => {
        const last = Number(await page.locator('#as-of').getAttribute('data-last'));
        expect(last).toBeGreaterThan(updatedAt);
      },
      15_000,
      250,
    );
    const between = (createdAt + updatedAt) / 2;
    await slideTo('as-of', between);
    await page.locator('#menu h2', { hasText: 'Menu as of' }).waitFor();
    const earlier = page.locator(`#menu [data-product-id="${created.json.id}"] .product-title`);
    await earlier.filter({ hasText: 'Soup of the day' }).waitFor({ timeout: 10_000 });
    await shot('menu-as-of');

    await slideTo('diff-from', between);
    const diff = page.locator('[data-testid=diff]');
    await diff.locator('li.changed', { hasText: 'Soup of the week' }).waitFor({ timeout: 10_000 });
    const change = await diff.locator('li.changed', { hasText: 'Soup of the week' }).textContent();
    expect(change).toMatch(/Product\s*Soup of the week/);
    expect(change).toContain('title “Soup of the day” → “Soup of the week”');
    await page.locator('#changes').screenshot({ path: path.join(ARTIFACTS_DIR, 'console-menu-diff.png') });
  }, 90_000);

  it('Events: a parked event is shown with its error, and what became of an applied one', async () => {
    // \u0000 in the subject: valid JSON that jsonb refuses, so the menu projection parks the event.
    const body = JSON.stringify(
      menuEvent('created', product('990001', { extra: { note: 'NOTE' } }), {
        at: new Date().toISOString(),
        ownerId: DEMO_OWNER,
      }),
    ).replace('"NOTE"', '"a\\u0000b"');
    const delivered = await fetch(`${daemon.url}/webhooks/${WEBHOOK_KEY}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(delivered.status).toBe(202);
    const { position } = (await delivered.json()) as Json;
    await eventually(
      async () =>
        expect((await api('/api/v1/projections/parked')).json.data).toEqual([expect.objectContaining({ position })]),
      15_000,
      200,
    );

    await open('events');
    const row = page.locator(`tr[data-position="${position}"]`);
    await row.waitFor({ timeout: 10_000 });
    await expect(row.textContent()).resolves.toContain('parked');
    await row.click();
    const fate = page.locator('[data-testid=fate]');
    await fate.waitFor();
    const text = await fate.textContent();
    expect(text).toContain('Parked: the projector could not apply it');
    const error = (await api('/api/v1/projections/parked')).json.data[0].error;
    expect(text).toContain(error);
    await expect(page.locator('#parked').textContent()).resolves.toContain(error);
    await shot('events-parked');

    // The Menu test's product: its update is the current version, its creation was superseded.
    expect(soupEvents).toHaveLength(2);
    await page.locator(`tr[data-position="${soupEvents[1]}"]`).click();
    await fate.filter({ hasText: 'Applied: this is the current version' }).waitFor();
    await page.locator(`tr[data-position="${soupEvents[0]}"]`).click();
    await fate.filter({ hasText: `Superseded by a newer version (event #${soupEvents[1]})` }).waitFor();
    await expect(page.locator('pre.payload').first().textContent()).resolves.toContain('"Soup of the day"');
  }, 60_000);

  it('Overview shows a table sink by its kind and its URL, the password masked', async () => {
    // Port 1 and an owner nobody has: the sink can deliver nothing.
    const created = await api('/api/v1/sinks', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        kind: 'postgres',
        url: 'postgres://shop:console-hidden-pw@127.0.0.1:1/catalogue',
        owner_ids: ['nobody'],
      }),
    });
    expect(created.status).toBe(201);
    try {
      await open('overview');
      // A sink's own row, not the rows of its attempts table below it.
      const row = page.locator('#sinks tbody tr.sink', { hasText: 'PostgreSQL' });
      await row.waitFor({ timeout: 15_000 });
      await expect(row.locator('td').nth(1).textContent()).resolves.toBe(
        'PostgreSQL postgres://shop:***@127.0.0.1:1/catalogue (schema menu_sync) · document layout',
      );
      await expect(page.content()).resolves.not.toContain('console-hidden-pw');
      await shot('table-sink');
    } finally {
      expect((await api(`/api/v1/sinks/${created.json.data.id}`, { method: 'DELETE' })).status).toBe(204);
    }
  }, 60_000);

  it('Activity charts deliveries and lag; every page reads at phone width', async () => {
    await open('activity');
    await page.locator('#deliveries canvas').waitFor({ timeout: 15_000 });
    await page.locator('#projection-lag canvas').waitFor();
    await shot('activity');

    await page.setViewportSize({ width: 390, height: 844 });
    for (const route of ['overview', 'menu', 'events', 'activity']) {
      await open(route);
      await page.waitForTimeout(1500);
      const overflow = await page.evaluate(
        () => (globalThis as Json).document.documentElement.scrollWidth - (globalThis as Json).innerWidth,
      );
      expect({ route, overflow }).toEqual({ route, overflow: 0 });
      await shot(`phone-${route}`);
    }
  }, 60_000);

  it('shows a read: token no write action nor the audit log (its role from GET /api/v1/whoami), an admin token each', async () => {
    await page.setViewportSize({ width: 1280, height: 900 });
    const asToken = async (token: string) => {
      await page.evaluate((value) => (globalThis as Json).sessionStorage.setItem('menu-sync.api-token', value), token);
      const role = page.waitForResponse((response) => response.url().endsWith('/api/v1/whoami'));
      await page.reload();
      expect((await role).status()).toBe(200);
      // The sandbox's own catalogue sink is listed.
      await page.locator('#sinks tbody tr').first().waitFor();
      await page.locator('#connections tbody tr').first().waitFor();
      await page.waitForTimeout(500);
      return {
        replay: await page.getByRole('button', { name: 'Replay' }).count(),
        connect: await page.getByRole('link', { name: 'Connect an account' }).count(),
        audit: await page.locator('#audit').count(),
      };
    };
    await open('overview');
    expect(await asToken(READ_TOKEN)).toEqual({ replay: 0, connect: 0, audit: 0 });
    await shot('overview-read-token');
    expect(await asToken(TOKEN)).toEqual({ replay: 1, connect: 1, audit: 1 });
    // The audit log, newest first: the sandbox made its catalogue sink, its connect flow a connection.
    await page.locator('#audit tbody tr').first().waitFor();
    const actions = await page.locator('#audit tbody tr td:nth-child(2)').allTextContents();
    expect(actions).toEqual(expect.arrayContaining(['sink.created', 'connection.created']));
    await page.locator('#audit').scrollIntoViewIfNeeded();
    await shot('overview-audit');
  }, 60_000);
  it('makes a stored token on the Tokens page, shows its secret once, and revokes it', async () => {
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.evaluate((value) => (globalThis as Json).sessionStorage.setItem('menu-sync.api-token', value), TOKEN);
    await open('tokens');
    await page.reload();
    await page.getByLabel('Name').fill('console reader');
    await page.getByLabel('Owners').fill(`${DEMO_OWNER}, 4002`);
    await page.getByRole('button', { name: 'Make token' }).click();
    const secret = (await page.locator('.new-secret .secret').textContent({ timeout: 10_000 }))!.trim();
    expect(secret).toMatch(/^mst_[A-Za-z0-9_-]{43}$/);
    const row = page.locator('#tokens tr.token', { hasText: 'console reader' });
    await row.waitFor();
    expect(await row.locator('td').nth(2).textContent()).toBe(`${DEMO_OWNER}, 4002`);
    const whoami = async () =>
      (await fetch(`${daemon.url}/api/v1/whoami`, { headers: { authorization: `Bearer ${secret}` } })).status;
    expect(await whoami()).toBe(200);
    await shot('tokens');

    page.once('dialog', (dialog) => void dialog.accept());
    await row.getByRole('button', { name: 'Revoke' }).click();
    await row.waitFor({ state: 'detached', timeout: 10_000 });
    await eventually(async () => expect(await whoami()).toBe(401), 5000, 50);
    expect(await page.locator('.new-secret').count()).toBe(1);
    await page.reload();
    await page.locator('#tokens').waitFor();
    // Shown once: not after a reload, nor in the list.
    expect(await page.content()).not.toContain(secret);
  }, 60_000);
});

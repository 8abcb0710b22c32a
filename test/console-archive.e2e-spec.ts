import type { Page } from 'playwright-core';
import { appendNextAt, archivePartition } from './support/archived-partition.js';
import { Browser, launchBrowser } from './support/browser.js';
import { API_TOKEN, deliver, RunningDaemon, startDaemon } from './support/http.js';
import { webhookEvent } from './support/webhook-events.js';

/** The console's Overview shows the archive (docs/reference.md §8): its files, their size, the horizon. */
const FIRST = '2024-01-10T12:00:00.000Z';
const ARCHIVED_UP_TO = '2024-01-20T12:00:00.000Z';

describe('the console shows the archive horizon', () => {
  let app: RunningDaemon;
  let browser: Browser;
  let page: Page;

  const archiveStat = () => page.locator('.stat', { has: page.locator('.label', { hasText: /^Archive$/ }) });

  beforeAll(async () => {
    app = await startDaemon();
    for (const [id, createdAt] of [
      ['701', FIRST],
      ['702', ARCHIVED_UP_TO],
    ])
      await deliver(app.url, webhookEvent({ eventType: 'product.created', subjectId: id, createdAt }));
    await appendNextAt(app.database.url, 1_000_000);
    await deliver(app.url, webhookEvent({ eventType: 'product.created', subjectId: '703' }));
    browser = await launchBrowser();
    page = await browser.context.newPage();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  const sliderFirst = () => page.locator('#as-of').getAttribute('data-first');
  const openMenu = async () => {
    await page.evaluate(() => {
      (globalThis as { location: { hash: string } }).location.hash = '#/menu';
    });
    await page.locator('#as-of').waitFor();
  };
  const openOverview = () =>
    page.evaluate(() => {
      (globalThis as { location: { hash: string } }).location.hash = '#/overview';
    });

  it('nothing archived, then the files and the horizon without a reload; the menu slider starts at the horizon', async () => {
    await page.goto(`${app.url}/console/`);
    await page.getByPlaceholder('API token').fill(API_TOKEN);
    await page.getByRole('button', { name: 'Open the console' }).click();
    await archiveStat().locator('.hint', { hasText: 'nothing archived' }).waitFor({ timeout: 15_000 });
    await expect(archiveStat().innerText()).resolves.toBe('ARCHIVE\n0 files\nnothing archived');
    await openMenu();
    await expect(sliderFirst()).resolves.toBe(String(Date.parse(FIRST)));
    await openOverview();

    await archivePartition(app.database.url, 'event_log_0', { bytes: 12_345 });
    await archiveStat().locator('.value', { hasText: '1 file' }).waitFor({ timeout: 10_000 });
    const shown = await archiveStat().innerText();
    expect(shown).toMatch(
      /^ARCHIVE\n1 file\n12\.1 KiB; the log holds positions from 1,000,000, as_of from 20 Jan 2024, \d\d:00:00$/,
    );
    await openMenu();
    // The oldest as_of the archive leaves: an earlier one would answer 410.
    await page.waitForFunction(
      (first) => (globalThis as any).document.querySelector('#as-of')?.dataset.first === first,
      String(Date.parse(ARCHIVED_UP_TO)),
      { timeout: 15_000 },
    );
  }, 60_000);
});

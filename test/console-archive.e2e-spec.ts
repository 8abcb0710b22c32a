import type { Page } from 'playwright-core';
import { appendNextAt, archivePartition } from './support/archived-partition.js';
import { Browser, launchBrowser } from './support/browser.js';
import { API_TOKEN, deliver, RunningDaemon, startDaemon } from './support/http.js';
import { webhookEvent } from './support/webhook-events.js';

/** The console's Overview shows the archive (docs/reference.md §8): its files, their size, the horizon. */
describe('the console shows the archive horizon', () => {
  let app: RunningDaemon;
  let browser: Browser;
  let page: Page;

  const archiveStat = () => page.locator('.stat', { has: page.locator('.label', { hasText: /^Archive$/ }) });

  beforeAll(async () => {
    app = await startDaemon();
    for (const id of ['701', '702'])
      await deliver(
        app.url,
        webhookEvent({ eventType: 'product.created', subjectId: id, createdAt: '2024-01-20T12:00:00.000Z' }),
      );
    await appendNextAt(app.database.url, 1_000_000);
    await deliver(app.url, webhookEvent({ eventType: 'product.created', subjectId: '703' }));
    browser = await launchBrowser();
    page = await browser.context.newPage();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it('nothing archived, then the files and the horizon without a reload', async () => {
    await page.goto(`${app.url}/console/`);
    await page.getByPlaceholder('API token').fill(API_TOKEN);
    await page.getByRole('button', { name: 'Open the console' }).click();
    await archiveStat().locator('.hint', { hasText: 'nothing archived' }).waitFor({ timeout: 15_000 });
    await expect(archiveStat().innerText()).resolves.toBe('ARCHIVE\n0 files\nnothing archived');

    await archivePartition(app.database.url, 'event_log_0', { bytes: 12_345 });
    await archiveStat().locator('.value', { hasText: '1 file' }).waitFor({ timeout: 10_000 });
    const shown = await archiveStat().innerText();
    expect(shown).toMatch(
      /^ARCHIVE\n1 file\n12\.1 KiB; the log holds positions from 1,000,000, as_of from 20 Jan 2024, \d\d:00:00$/,
    );
  }, 60_000);
});

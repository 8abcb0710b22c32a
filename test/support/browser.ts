import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BrowserContext, chromium } from 'playwright-core';
import { ROOT_DIR } from './daemon-process.js';

/** Debian's chromium (apt-get install chromium; .ci/run installs it): playwright-core never downloads a browser. */
export const CHROMIUM = '/usr/bin/chromium';

/** Screenshots for people to look at (git-ignored). */
export const ARTIFACTS_DIR = path.join(ROOT_DIR, 'test', 'artifacts');

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** A headless chromium with a fresh profile, as this machine's environment asks. */
export async function launchBrowser(viewport = { width: 1280, height: 800 }): Promise<Browser> {
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  const profile = await mkdtemp(path.join(tmpdir(), 'menu-sync-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { jest } from '@jest/globals';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../config/app-config.js';
import { DeliveriesInFlight } from '../ingress/deliveries-in-flight.js';
import { MenuDocumentCache } from './menu-document.cache.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'menu-cache-spec-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const cacheOf = (env: Record<string, string>) =>
  new MenuDocumentCache(loadConfig({ MENU_CACHE_DIR: dir, ...env }), new DeliveriesInFlight());

/** The files the cache holds (bodies being written end in .part). */
const files = () => readdirSync(dir).flatMap((sub) => readdirSync(join(dir, sub)));

async function* body(...chunks: string[]): AsyncGenerator<string> {
  yield* chunks;
}

async function drain(chunks: AsyncIterable<Buffer | string>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of chunks) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts).toString('utf8');
}

const mb = (n: number) => 'x'.repeat(n * 1024 * 1024);

describe('MenuDocumentCache', () => {
  it('passes a body through and serves it again for the same owner, form and version only', async () => {
    const cache = cacheOf({ MENU_CACHE_MB: '8' });
    expect(await drain(cache.keep('7', 'expanded', 'v1', 'c1', body('{"a":', '1}')))).toBe('{"a":1}');
    const hit = (await cache.open('7', 'expanded', 'v1'))!;
    expect(await drain(hit.body)).toBe('{"a":1}');
    expect(hit.changesCursor).toBe('c1');
    expect(cache.get('7', 'normalized', 'v1')).toBeUndefined();
    expect(cache.get('8', 'expanded', 'v1')).toBeUndefined();
    // Another version drops it: the owner's menu changed.
    expect(cache.get('7', 'expanded', 'v2')).toBeUndefined();
    expect(cache.get('7', 'expanded', 'v1')).toBeUndefined();
  });

  it('sends a kept body a MiB at a time, each waiting (at most MENU_YIELD_MS) for the deliveries in flight', async () => {
    const deliveries = new DeliveriesInFlight();
    // A wait long next to reading 2 MB from a file, even under a loaded test run.
    const yieldMs = 1000;
    const cache = new MenuDocumentCache(
      loadConfig({ MENU_CACHE_DIR: dir, MENU_CACHE_MB: '16', MENU_YIELD_MS: String(yieldMs) }),
      deliveries,
    );
    const whole = `${mb(2)}${'y'.repeat(1000)}`;
    await drain(cache.keep('7', 'expanded', 'v1', 'c1', body(whole)));
    const timed = async () => {
      const started = performance.now();
      const text = await drain((await cache.open('7', 'expanded', 'v1'))!.body);
      return { text, ms: performance.now() - started };
    };
    const idle = await timed();
    expect(idle.text).toBe(whole);
    expect(idle.ms).toBeLessThan(yieldMs);
    // A delivery that never ends: each of the 3 chunks waits out MENU_YIELD_MS, then goes anyway.
    deliveries.begin();
    const busy = await timed();
    expect(busy.text).toBe(whole);
    expect(busy.ms).toBeGreaterThanOrEqual(3 * yieldMs - 5);
    // The delivery ends while the body waits: the rest goes at once.
    const reading = timed();
    setTimeout(() => deliveries.end(), 50);
    const released = await reading;
    expect(released.text).toBe(whole);
    expect(released.ms).toBeLessThan(yieldMs + 50);
  });

  it('keeps nothing of a body whose reader stopped halfway, nor of one larger than half of MENU_CACHE_MB', async () => {
    const cache = cacheOf({ MENU_CACHE_MB: '8' });
    const reading = cache.keep('7', 'expanded', 'v1', 'c1', body('{"a":', '1}'));
    await reading.next();
    await reading.return(undefined);
    expect(cache.get('7', 'expanded', 'v1')).toBeUndefined();
    expect(files()).toEqual([]);
    expect((await drain(cache.keep('7', 'expanded', 'v1', 'c1', body(mb(2), mb(2), '!')))).length).toBe(
      4 * 1024 * 1024 + 1,
    );
    expect(cache.get('7', 'expanded', 'v1')).toBeUndefined();
    expect(files()).toEqual([]);
  });

  it('drops the least recently used bodies beyond MENU_CACHE_MB, and bodies older than half the change retention', async () => {
    const cache = cacheOf({ MENU_CACHE_MB: '8', CHANGES_RETENTION: '2m' });
    for (const owner of ['1', '2', '3']) await drain(cache.keep(owner, 'expanded', 'v', 'c', body(mb(2))));
    expect(cache.get('1', 'expanded', 'v')).toBeDefined();
    await drain(cache.keep('4', 'expanded', 'v', 'c', body(mb(2))));
    await drain(cache.keep('5', 'expanded', 'v', 'c', body(mb(1))));
    // 9 MB asked for 8: the least recently used (2, as 1 was just read) is out.
    expect(cache.get('2', 'expanded', 'v')).toBeUndefined();
    for (const owner of ['1', '3', '4', '5']) expect(cache.get(owner, 'expanded', 'v')).toBeDefined();
    expect(cache.get('1', 'expanded', 'v', Date.now() + 61_000)).toBeUndefined();
    // Dropped bodies' files go too (unlinked without waiting).
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(files()).toHaveLength(3);
  });

  it('serves a body read before it was dropped to its end, and removes its directory when the module stops', async () => {
    const cache = cacheOf({ MENU_CACHE_MB: '8' });
    await drain(cache.keep('1', 'expanded', 'v1', 'c', body(mb(1), '!')));
    const stream = (await cache.open('1', 'expanded', 'v1'))!.body;
    expect(cache.get('1', 'expanded', 'v2')).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(files()).toEqual([]);
    expect((await drain(stream)).length).toBe(1024 * 1024 + 1);
    const [own] = readdirSync(dir);
    cache.onModuleDestroy();
    expect(existsSync(join(dir, own))).toBe(false);
  });

  it('sends a body whole when writing its file fails, and keeps nothing of it', async () => {
    const cache = cacheOf({ MENU_CACHE_MB: '8' });
    // Any FileHandle's prototype is the one the cache's handles write through.
    const probe = await open(join(tmpdir(), `menu-cache-probe-${process.pid}`), 'w');
    const write = jest
      .spyOn(Object.getPrototypeOf(probe), 'write')
      .mockRejectedValueOnce(new Error('ENOSPC: no space left on device'));
    await probe.close();
    rmSync(join(tmpdir(), `menu-cache-probe-${process.pid}`), { force: true });
    try {
      expect(await drain(cache.keep('7', 'expanded', 'v1', 'c1', body('{"a":', '1', '}')))).toBe('{"a":1}');
      expect(write).toHaveBeenCalled();
    } finally {
      write.mockRestore();
    }
    expect(cache.get('7', 'expanded', 'v1')).toBeUndefined();
    expect(files()).toEqual([]);
  });

  it('with MENU_CACHE_MB=0 keeps nothing', async () => {
    const cache = cacheOf({ MENU_CACHE_MB: '0' });
    expect(await drain(cache.keep('7', 'expanded', 'v1', 'c1', body('{}')))).toBe('{}');
    expect(cache.get('7', 'expanded', 'v1')).toBeUndefined();
  });
});

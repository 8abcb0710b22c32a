import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The `version` of menu-sync's package.json: the nearest one above this file, which is the
 * repository's from `src/` and from `dist/src/` alike (and the image's `/app/package.json`).
 */
export function packageVersion(from = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const manifest = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
      if (manifest.name === 'menu-sync' && typeof manifest.version === 'string') return manifest.version;
    }
    if (dirname(dir) === dir) throw new Error(`no package.json of menu-sync above ${from}`);
  }
}

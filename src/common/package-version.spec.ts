import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageVersion } from './package-version.js';

describe('packageVersion', () => {
  it("is the repository's package.json version", () => {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    expect(packageVersion()).toBe(manifest.version);
  });

  it("skips a package.json that is not menu-sync's, and says so when there is none", async () => {
    const root = await mkdtemp(join(tmpdir(), 'menu-sync-version-'));
    try {
      await mkdir(join(root, 'app', 'dist', 'src', 'node_modules', 'x'), { recursive: true });
      await writeFile(join(root, 'app', 'package.json'), JSON.stringify({ name: 'menu-sync', version: '9.8.7' }));
      await writeFile(
        join(root, 'app', 'dist', 'src', 'node_modules', 'x', 'package.json'),
        '{"name":"x","version":"1.0.0"}',
      );
      expect(packageVersion(join(root, 'app', 'dist', 'src', 'node_modules', 'x'))).toBe('9.8.7');
      expect(() => packageVersion(join(root, 'elsewhere'))).toThrow(
        `no package.json of menu-sync above ${join(root, 'elsewhere')}`,
      );
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

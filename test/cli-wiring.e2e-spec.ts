import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { runCli } from './support/cli.js';
import { ROOT_DIR } from './support/daemon-process.js';

/**
 * nest-commander finds the CLI's commands through @golevelup/nestjs-discovery, whose peer range is
 * Nest 11; package.json's `overrides` points it at the project's Nest 12 (docs/runtime.md). These
 * fail if npm ever installs a second Nest for it, or the built CLI stops finding its commands.
 */

/** The directory of package `name` as Node resolves it from `dir`: the nearest node_modules up the tree. */
function packageDir(name: string, dir: string): string {
  for (let at = dir; ; at = path.dirname(at)) {
    const candidate = path.join(at, 'node_modules', name);
    if (existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (path.dirname(at) === at) throw new Error(`${name} not found from ${dir}`);
  }
}

function version(dir: string): string {
  return (JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version;
}

describe('the CLI on Nest 12', () => {
  it("nest-commander's discovery package uses the project's own @nestjs/core and @nestjs/common", () => {
    const discovery = packageDir('@golevelup/nestjs-discovery', packageDir('nest-commander', ROOT_DIR));
    const seen = ['@nestjs/core', '@nestjs/common'].map((name) => ({ name, dir: packageDir(name, discovery) }));
    expect(seen).toEqual([
      { name: '@nestjs/core', dir: path.join(ROOT_DIR, 'node_modules', '@nestjs/core') },
      { name: '@nestjs/common', dir: path.join(ROOT_DIR, 'node_modules', '@nestjs/common') },
    ]);
    expect(version(seen[0].dir).split('.')[0]).toBe('12');
  });

  it('--help lists every top-level command declared in src/cli', async () => {
    const cliDir = path.join(ROOT_DIR, 'src', 'cli');
    const declared = readdirSync(cliDir)
      .filter((file) => file.endsWith('.ts') && !file.endsWith('spec.ts'))
      .flatMap((file) => [
        ...readFileSync(path.join(cliDir, file), 'utf8').matchAll(/@Command\(\{\s*name:\s*'([^']+)'/g),
      ])
      .map((match) => match[1])
      .sort();
    const result = await runCli(['--help'], {});
    const commands = result.stdout.split('\nCommands:\n')[1] ?? '';
    const listed = commands
      .split('\n')
      .map((line) => /^ {2}(\S+)/.exec(line)?.[1])
      .filter((name): name is string => name !== undefined && name !== 'help')
      .sort();
    expect({ code: result.code, listed }).toEqual({ code: 0, listed: declared });
    expect(declared.length).toBeGreaterThanOrEqual(10);
  });
});

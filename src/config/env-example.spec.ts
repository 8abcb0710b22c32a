import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { configVariables } from './app-config.js';

const read = (file: string) => readFileSync(fileURLToPath(new URL(`../../${file}`, import.meta.url)), 'utf8');

/** `NAME` of every `NAME=…` line of config/.env.example, commented out (`# NAME=`) or not. */
function exampleVariables(): string[] {
  return [...read('config/.env.example').matchAll(/^#?\s*([A-Z][A-Z0-9_]*)=/gm)].map((match) => match[1]);
}

/** The variables of the README's configuration table (its first column, one or more names per row). */
function readmeVariables(): string[] {
  const section = /\n## Configuration\n([\s\S]*?)\n## /.exec(read('README.md'))![1];
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...line.split('|')[1].matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((match) => match[1]));
}

describe('the documented configuration', () => {
  const variables = configVariables();

  it('finds the variables the configuration reads (a sample of them, to show the list is the real one)', () => {
    expect(variables).toEqual(
      expect.arrayContaining([
        'DATABASE_URL',
        'SINK_ALLOWED_NETWORKS',
        'SINK_ATTEMPTS_RETENTION',
        'HEAP_GROWTH_PERCENT',
      ]),
    );
    expect(variables.length).toBeGreaterThanOrEqual(45);
  });

  it('config/.env.example names every variable the configuration reads, and none it does not read', () => {
    const example = exampleVariables();
    expect(variables.filter((name) => !example.includes(name))).toEqual([]);
    expect(example.filter((name) => !variables.includes(name))).toEqual([]);
    expect(example.filter((name, index) => example.indexOf(name) !== index)).toEqual([]);
  });

  it("the README's configuration table names every variable the configuration reads, and none it does not read", () => {
    const table = readmeVariables();
    expect(variables.filter((name) => !table.includes(name))).toEqual([]);
    expect(table.filter((name) => !variables.includes(name))).toEqual([]);
  });
});

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The layers of ARCHITECTURE.md, read from its `layers` block (bottom first; rooms on one line
 * share a layer and must not import each other): a production file of `src/` imports only from
 * its own room and from rooms of lower layers, the domain imports nothing of Nest or the database,
 * and every room of `src/` has its place.
 */
const SRC = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(SRC, '..');

/** The `layers` block of ARCHITECTURE.md, or the `layers <room>` block of a room's own rooms. */
function layers(room?: string): string[][] {
  const text = readFileSync(join(ROOT, 'ARCHITECTURE.md'), 'utf8');
  const block = new RegExp('```layers' + (room === undefined ? '' : ` ${room}`) + '\\n([\\s\\S]*?)```').exec(text);
  if (!block) throw new Error(`ARCHITECTURE.md has no \`\`\`layers${room === undefined ? '' : ` ${room}`} block`);
  return block[1]
    .split('\n')
    .map((line) => line.replace(/#.*/, '').trim())
    .filter(Boolean)
    .map((line) => line.split(/[\s,]+/));
}

function productionFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return productionFiles(path);
    return /\.ts$/.test(entry.name) && !/\.(spec|int-spec|e2e-spec)\.ts$/.test(entry.name) ? [path] : [];
  });
}

/** The room of a file: its top folder under src/, or for a file directly in src/ its name. */
const roomOf = (file: string) => relative(SRC, file).split(sep)[0].replace(/\.ts$/, '');

interface Import {
  file: string;
  from: string;
  to: string;
  specifier: string;
}

function imports(): Import[] {
  return productionFiles(SRC).flatMap((file) => {
    const found: Import[] = [];
    for (const match of readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)) {
      const specifier = match[1];
      const to = specifier.startsWith('.') ? resolve(dirname(file), specifier) : null;
      if (to !== null && !to.startsWith(SRC + sep)) continue;
      found.push({
        file: relative(ROOT, file),
        from: roomOf(file),
        to: to === null ? specifier : roomOf(to.replace(/\.js$/, '.ts')),
        specifier,
      });
    }
    return found;
  });
}

/** The room of a file of src/sinks/: its folder there, `core` for a file directly in it, `sinks.module` for the module. */
function sinkRoomOf(file: string): string {
  const parts = relative(join(SRC, 'sinks'), file).split(sep);
  if (parts.length > 1) return parts[0];
  return parts[0] === 'sinks.module.ts' ? 'sinks.module' : 'core';
}

describe('layering (ARCHITECTURE.md)', () => {
  const order = layers();
  const layerOf = new Map(order.flatMap((rooms, index) => rooms.map((room) => [room, index] as const)));
  const all = imports();

  it('places every room of src/ in a layer, and names no room that does not exist', () => {
    const rooms = new Set(productionFiles(SRC).map(roomOf));
    expect([...rooms].filter((room) => !layerOf.has(room)).sort()).toEqual([]);
    expect([...layerOf.keys()].filter((room) => !rooms.has(room)).sort()).toEqual([]);
  });

  it('imports only from the same room or a lower layer', () => {
    const upward = all
      .filter(({ specifier }) => specifier.startsWith('.'))
      .filter(({ from, to }) => from !== to && !(layerOf.get(to)! < layerOf.get(from)!))
      .map(
        ({ file, from, to }) =>
          `${file}: ${from} (layer ${layerOf.get(from)}) imports ${to} (layer ${layerOf.get(to)})`,
      );
    expect(upward).toEqual([]);
  });

  it('keeps the domain pure: no Nest, no database, no other room', () => {
    const impure = all
      .filter(({ from }) => from === 'domain')
      .filter(({ to, specifier }) =>
        specifier.startsWith('.') ? to !== 'domain' : /^(@nestjs|typeorm|pg)(\/|$)/.test(specifier),
      )
      .map(({ file, specifier }) => `${file} imports ${specifier}`);
    expect(impure).toEqual([]);
  });

  it('lays out the rooms of sinks/ in layers of their own, imports running down', () => {
    const order = layers('sinks');
    const layerOf = new Map(order.flatMap((rooms, index) => rooms.map((room) => [room, index] as const)));
    const sinks = join(SRC, 'sinks') + sep;
    const files = productionFiles(join(SRC, 'sinks'));
    const rooms = new Set(files.map(sinkRoomOf));
    expect([...rooms].filter((room) => !layerOf.has(room)).sort()).toEqual([]);
    expect([...layerOf.keys()].filter((room) => !rooms.has(room)).sort()).toEqual([]);
    const upward = files.flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*['"](\.[^'"]+)['"]/g)]
        .map((match) => resolve(dirname(file), match[1]).replace(/\.js$/, '.ts'))
        .filter((to) => to.startsWith(sinks))
        .map((to) => [sinkRoomOf(file), sinkRoomOf(to)] as const)
        .filter(([from, to]) => from !== to && !(layerOf.get(to)! < layerOf.get(from)!))
        .map(([from, to]) => `${relative(ROOT, file)}: ${from} imports ${to}`),
    );
    expect(upward).toEqual([]);
  });
});

#!/usr/bin/env node
// Summarises a V8 CPU profile (`node --cpu-prof`, e.g. BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR"):
// the top functions by self time, and self time by area (a room of src/, a package of
// node_modules, node's internals, GC), in % of the non-idle samples.
//
//   node bench/cpu-profile.js FILE.cpuprofile [--top=25] [--from=US --to=US]
//
// --from/--to: a window in microseconds of the monotonic clock (the profile's own timestamps; an
// ingress run records its measured seconds as `measuredUs` in its JSON results).
import { readFileSync } from 'node:fs';

function parseArgs(argv) {
  const options = { top: 25, from: -Infinity, to: Infinity, files: [] };
  for (const arg of argv) {
    const match = /^--(top|from|to)=(\d+)$/.exec(arg);
    if (match) options[match[1]] = Number(match[2]);
    else options.files.push(arg);
  }
  return options;
}

/** The area of a frame's script: src/<room>, a package, node:internal, or V8's pseudo frames. */
export function areaOf(node) {
  const { url, functionName } = node.callFrame;
  if (url === '') return `(${functionName.replace(/[()]/g, '') || 'native'})`;
  const src = /\/dist\/src\/([^/]+)\//.exec(url);
  if (src) return `src/${src[1]}`;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return url.split('/').slice(0, 2).join('/');
  return url.replace(/^file:\/\//, '');
}

/** The room of src/ nearest the leaf on a node's stack (what the sample was done for, as far as a stack tells), or null. */
function roomOf(nodes, parents, id) {
  for (let at = id; at !== undefined; at = parents.get(at)) {
    const area = areaOf(nodes.get(at));
    if (area.startsWith('src/')) return area;
  }
  return null;
}

/** Self samples per node id within the window; idle samples left out. */
export function summarise(profile, { from = -Infinity, to = Infinity } = {}) {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
  const self = new Map();
  let at = profile.startTime;
  let total = 0;
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i];
    if (at < from || at > to) return;
    const node = nodes.get(id);
    if (node.callFrame.functionName === '(idle)') return;
    self.set(id, (self.get(id) ?? 0) + 1);
    total++;
  });
  const byFunction = new Map();
  const byArea = new Map();
  const byRoom = new Map();
  for (const [id, count] of self) {
    const room = roomOf(nodes, parents, id) ?? '(no src/ frame: callbacks of sockets, timers, GC)';
    byRoom.set(room, (byRoom.get(room) ?? 0) + count);
    const node = nodes.get(id);
    const { functionName, url, lineNumber } = node.callFrame;
    const file = url.replace(/^.*\/(dist\/src|node_modules)\//, '$1/').replace(/^file:\/\//, '');
    const key = `${functionName || '(anonymous)'} ${file}${url ? `:${lineNumber + 1}` : ''}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + count);
    const area = areaOf(node);
    byArea.set(area, (byArea.get(area) ?? 0) + count);
  }
  const share = (map) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .map(([name, count]) => ({ name, pct: Math.round((count / total) * 1000) / 10 }));
  const seconds = (Math.min(to, profile.endTime) - Math.max(from, profile.startTime)) / 1e6;
  const sampleUs = (profile.endTime - profile.startTime) / profile.samples.length;
  return {
    samples: total,
    cpuSeconds: Math.round(((total * sampleUs) / 1e6) * 100) / 100,
    seconds: Math.round(seconds * 100) / 100,
    functions: share(byFunction),
    areas: share(byArea),
    rooms: share(byRoom),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const options = parseArgs(process.argv.slice(2));
  for (const file of options.files) {
    const summary = summarise(JSON.parse(readFileSync(file, 'utf8')), options);
    console.log(`${file}: ${summary.samples} samples, ~${summary.cpuSeconds} CPU s over ${summary.seconds} s`);
    console.log('\nself time by area (% of non-idle samples)');
    for (const { name, pct } of summary.areas.slice(0, options.top)) console.log(`${String(pct).padStart(6)}  ${name}`);
    console.log('\nby the src/ room nearest the leaf of the stack');
    for (const { name, pct } of summary.rooms.slice(0, options.top)) console.log(`${String(pct).padStart(6)}  ${name}`);
    console.log('\ntop functions by self time');
    for (const { name, pct } of summary.functions.slice(0, options.top))
      console.log(`${String(pct).padStart(6)}  ${name}`);
    console.log('');
  }
}

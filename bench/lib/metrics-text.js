// Reading the daemon's Prometheus text in the benches: a scrape, gauges, and a histogram's change over a run.

export async function scrape(base) {
  const response = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5000) });
  return response.ok ? await response.text() : '';
}

export function gauges(text, names) {
  const out = {};
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const name = names.find((n) => line.startsWith(`${n} `) || line.startsWith(`${n}{`));
    if (name) out[line.slice(0, line.lastIndexOf(' '))] = Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return out;
}

export function parseHistogram(text, name) {
  const buckets = new Map();
  let sum = 0;
  let count = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}_bucket{`)) {
      const le = /le="([^"]+)"/.exec(line)?.[1];
      buckets.set(le, Number(line.slice(line.lastIndexOf(' ') + 1)));
    } else if (line.startsWith(`${name}_sum`)) {
      sum = Number(line.slice(line.lastIndexOf(' ') + 1));
    } else if (line.startsWith(`${name}_count`)) {
      count = Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return { buckets, sum, count };
}

/** The histogram's observations made during the measured run: cumulative buckets, count, mean. */
export function histogramDelta(beforeText, afterText, name) {
  const before = parseHistogram(beforeText ?? '', name);
  const after = parseHistogram(afterText, name);
  const buckets = {};
  const order = (le) => (le === '+Inf' ? Infinity : Number(le));
  for (const [le, value] of [...after.buckets].sort(([a], [b]) => order(a) - order(b))) {
    buckets[le] = value - (before.buckets.get(le) ?? 0);
  }
  const count = after.count - before.count;
  return { count, mean: count > 0 ? round((after.sum - before.sum) / count, 4) : null, cumulativeBuckets: buckets };
}

export function round(value, digits) {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

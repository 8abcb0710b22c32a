import { setFlagsFromString } from 'node:v8';

/**
 * Caps how far the heap may grow past the data the last full collection kept. V8 otherwise lets
 * it grow up to fourfold while collections are cheap, and a sink catching up allocates batches
 * fast enough to use all of it. V8 reads the factor at every full collection, so setting it after
 * start takes effect from the next one; NODE_OPTIONS cannot carry this flag.
 */
export function limitHeapGrowth(percent: number): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${percent}`);
}

import { createHash } from 'node:crypto';

/**
 * A deterministic number in [0, 1) for a seed and a list of parts (e.g. `['duplicate', 17]`).
 * Each fault decision hashes what it is about instead of drawing from a shared stream, so one
 * decision never shifts another: the same seed and the same changes give the same faults.
 */
export function seededUnit(seed: number, ...parts: (string | number)[]): number {
  const digest = createHash('sha256')
    .update(`${seed}:${parts.join(':')}`)
    .digest();
  return digest.readUInt32BE(0) / 2 ** 32;
}

/** A seeded Fisher–Yates shuffle of a copy of `items`. */
export function seededShuffle<T>(items: readonly T[], seed: number, ...parts: (string | number)[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(seededUnit(seed, ...parts, i) * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** A small seeded PRNG (mulberry32) for randomised e2e tests: the same seed draws the same run. */
export class SeededPrng {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** A number in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }

  /** `count` distinct items of `items`, in a random order. */
  sample<T>(items: readonly T[], count: number): T[] {
    const copy = [...items];
    for (let i = copy.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [copy[i], copy[j]] = [copy[j], copy[i]];
    }
    return copy.slice(0, count);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }
}

/** The seed of a randomised test: TEST_SEED when set (to replay a failure), else a fresh one. */
export function testSeed(): number {
  const given = process.env.TEST_SEED;
  return given === undefined || given === '' ? Math.floor(Math.random() * 2 ** 31) : Number(given);
}

/**
 * At most `max` of the work given to `run` at once; the rest waits its turn in order. For work that
 * many callers start together (thousands of sink loops starting with their dispatcher) and that
 * would otherwise all wait on one connection pool, and time out there.
 */
export class Limiter {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly max: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.active >= this.max) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next === undefined) this.active--;
      else next();
    }
  }
}

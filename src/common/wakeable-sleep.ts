/**
 * The sleep of a polling loop that something can cut short: `wake()` when there is new work,
 * `stop()` at shutdown. A wake that comes while the loop is busy is kept until the loop takes it
 * (`takeWake()`, when it starts looking), so the next `sleep` returns at once and no wake is lost
 * between a look and the sleep after it.
 */
export class WakeableSleep {
  private woken = false;
  private stopped = false;
  private readonly sleeping = new Set<() => void>();
  private readonly pausing = new Set<() => void>();

  /** Ends the sleep under way, or the next one if none is. */
  wake(): void {
    this.woken = true;
    for (const end of [...this.sleeping]) end();
  }

  /** Ends every sleep and pause under way, and every later one at once. */
  stop(): void {
    this.stopped = true;
    for (const end of [...this.sleeping, ...this.pausing]) end();
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** Whether a wake came that was not taken yet. */
  get isWoken(): boolean {
    return this.woken;
  }

  /** Whether a wake came since the last call, and forgets it: a loop calls this as it starts looking. */
  takeWake(): boolean {
    const woken = this.woken;
    this.woken = false;
    return woken;
  }

  /** Waits `ms` (Infinity: with no timer, until woken), less if woken or stopped; not at all while a wake is untaken or after the stop. */
  sleep(ms: number): Promise<void> {
    if (this.woken || this.stopped) return Promise.resolve();
    return this.wait(ms, this.sleeping);
  }

  /** Waits `ms`, less only if stopped: a wait that new work must not shorten (standby, retry, coalescing). */
  pause(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return this.wait(ms, this.pausing);
  }

  private wait(ms: number, waiting: Set<() => void>): Promise<void> {
    return new Promise((resolve) => {
      const end = () => {
        clearTimeout(timer);
        waiting.delete(end);
        resolve();
      };
      const timer = ms === Infinity ? undefined : setTimeout(end, ms);
      waiting.add(end);
    });
  }
}

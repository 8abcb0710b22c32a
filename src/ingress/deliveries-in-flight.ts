import { Injectable } from '@nestjs/common';

/**
 * How many webhook deliveries are being handled right now, and a wait for none: bulk work (a kept
 * `/menu` body streamed to a fast client) gives way to ingress, whose answer the platform waits
 * for and retries only five times. Fast clients of a big menu would otherwise take the daemon's
 * time in copies to their sockets, and ingress's latency with it.
 */
@Injectable()
export class DeliveriesInFlight {
  private count = 0;
  private readonly waiting = new Set<() => void>();

  begin(): void {
    this.count++;
  }

  end(): void {
    this.count--;
    if (this.count > 0) return;
    const waiting = [...this.waiting];
    this.waiting.clear();
    for (const resume of waiting) resume();
  }

  /** Resolves when no delivery is in flight: at once, when the last one ends, or after `maxMs`, whichever comes first. */
  quiet(maxMs: number): Promise<void> {
    if (this.count === 0 || maxMs <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const resume = () => {
        clearTimeout(timer);
        this.waiting.delete(resume);
        resolve();
      };
      const timer = setTimeout(resume, maxMs);
      this.waiting.add(resume);
    });
  }
}

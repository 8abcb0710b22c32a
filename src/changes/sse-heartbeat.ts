import type { Writable } from 'node:stream';

/** What a stream tells the heartbeat: it wrote (no comment due for a while), or it ended. */
export interface Beating {
  wrote(): void;
  end(): void;
}

/**
 * The keep-alive comments of every SSE stream of the process from one timer: a stream that wrote
 * nothing for `everyMs` gets `:\n\n`. A timer per stream (better-sse's keepAlive) cost 8 % of a core
 * with 10,000 idle clients, for the same comments.
 */
export class SseHeartbeat {
  private readonly streams = new Map<Writable, number>();
  private timer?: NodeJS.Timeout;

  constructor(private readonly everyMs: number) {}

  follow(stream: Writable): Beating {
    this.streams.set(stream, Date.now());
    this.timer ??= setInterval(() => this.beat(), Math.min(1000, this.everyMs)).unref();
    return {
      wrote: () => {
        if (this.streams.has(stream)) this.streams.set(stream, Date.now());
      },
      end: () => {
        this.streams.delete(stream);
        if (this.streams.size > 0) return;
        clearInterval(this.timer);
        this.timer = undefined;
      },
    };
  }

  private beat(): void {
    const now = Date.now();
    for (const [stream, at] of this.streams) {
      if (now - at < this.everyMs) continue;
      this.streams.set(stream, now);
      if (stream.writable) stream.write(':\n\n');
    }
  }
}

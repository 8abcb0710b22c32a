import { setTimeout as sleep } from 'node:timers/promises';

/** The time the budget reads and waits on; injectable so that tests run on a virtual one. */
export interface BudgetClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

const REAL_CLOCK: BudgetClock = { now: () => Date.now(), sleep: (ms) => sleep(ms) };

/**
 * `rate` calls are spread over a second and this much more: a call let through arrives at the
 * platform a little later, by a varying few to tens of milliseconds (the network, a busy event
 * loop on either side), and must still not make a second there hold `rate` + 1 calls.
 */
const ARRIVAL_MARGIN_MS = 100;

/** One key's share of the budget. */
interface Lane {
  /** The last caller in line: each waits for the one before it. */
  tail: Promise<void>;
  lastGrantAt: number;
  /** Nobody is let through before this (a 429's `Retry-After`). */
  pausedUntil: number;
}

/** What one call sees of the budget: wait for its turn, or pause everyone after a 429. */
export interface CallBudget {
  take(signal?: AbortSignal): Promise<void>;
  pause(ms: number): void;
}

/**
 * Calls per second per key (a connection), with no burst: the calls of a key are let through in
 * the order they asked, at least (1 s + 100 ms)/rate apart, so that no second holds more than
 * `rate` of them. A pause (a 429 with `Retry-After`) holds back every caller of the key until it ends; the
 * calls then resume one interval apart. A caller's `signal` abandons its wait with its reason.
 */
export class RateBudget {
  private readonly lanes = new Map<number, Lane>();
  private readonly intervalMs: number;

  constructor(
    perSecond: number,
    private readonly clock: BudgetClock = REAL_CLOCK,
  ) {
    this.intervalMs = (1000 + ARRIVAL_MARGIN_MS) / perSecond;
  }

  for(key: number): CallBudget {
    return { take: (signal) => this.take(key, signal), pause: (ms) => this.pause(key, ms) };
  }

  take(key: number, signal?: AbortSignal): Promise<void> {
    const lane = this.lane(key);
    const turn = lane.tail.then(() => this.grant(lane, signal));
    lane.tail = turn.then(
      () => undefined,
      () => undefined,
    );
    return signal === undefined ? turn : abandonable(turn, signal);
  }

  /** Holds back every caller of `key` for `ms` from now (a pause already longer stays). */
  pause(key: number, ms: number): void {
    const lane = this.lane(key);
    lane.pausedUntil = Math.max(lane.pausedUntil, this.clock.now() + ms);
  }

  private async grant(lane: Lane, signal: AbortSignal | undefined): Promise<void> {
    for (;;) {
      // A caller that gave up while in line takes no slot.
      signal?.throwIfAborted();
      const delay = Math.max(lane.pausedUntil, lane.lastGrantAt + this.intervalMs) - this.clock.now();
      if (delay <= 0) {
        lane.lastGrantAt = this.clock.now();
        return;
      }
      // Looked at again after the wait: a 429 seen meanwhile may have paused the key further.
      await this.clock.sleep(Math.ceil(delay));
    }
  }

  private lane(key: number): Lane {
    let lane = this.lanes.get(key);
    if (lane === undefined) {
      lane = { tail: Promise.resolve(), lastGrantAt: -Infinity, pausedUntil: 0 };
      this.lanes.set(key, lane);
    }
    return lane;
  }
}

/** `turn`, or the signal's reason as soon as it fires. */
function abandonable(turn: Promise<void>, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const abandon = () => reject(signal.reason);
    if (signal.aborted) return abandon();
    signal.addEventListener('abort', abandon, { once: true });
    turn.then(resolve, reject).finally(() => signal.removeEventListener('abort', abandon));
  });
}

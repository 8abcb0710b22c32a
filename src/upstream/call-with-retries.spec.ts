import { Logger } from '@nestjs/common';
import { callWithRetries } from './call-with-retries.js';
import type { Answer } from './call-with-retries.js';
import type { CallBudget } from './rate-budget.js';
import { DEFAULT_UPSTREAM_TIMINGS } from './upstream-timings.js';
import type { UpstreamTimings } from './upstream-timings.js';

const timings: UpstreamTimings = {
  ...DEFAULT_UPSTREAM_TIMINGS,
  baseDelayMs: 4,
  maxDelayMs: 8,
  maxRetryAfterMs: 20,
  random: () => 0.5,
};
const logger = new Logger('test');
logger.warn = () => undefined;

const answer = (status: number, headers: Record<string, string> = {}): Answer => ({
  status,
  headers: new Headers(headers),
});

/** A budget that notes what it is asked. */
function notingBudget(): CallBudget & { taken: number; pauses: number[] } {
  const budget = {
    taken: 0,
    pauses: [] as number[],
    take: async () => {
      budget.taken++;
    },
    pause: (ms: number) => {
      budget.pauses.push(ms);
    },
  };
  return budget;
}

describe('callWithRetries with a budget and a deadline', () => {
  it('takes a turn of the budget for every attempt, and pauses it after a 429: for its Retry-After (capped), else for the backoff', async () => {
    const budget = notingBudget();
    const answers = [answer(429, { 'retry-after': '2' }), answer(429), answer(503), answer(200)];
    const got = await callWithRetries(
      timings,
      { label: 'GET /x', repeatable: true, budget, send: async () => answers.shift()! },
      logger,
    );
    expect(got.status).toBe(200);
    expect(budget.taken).toBe(4);
    // 2 s capped at 20 ms; then no Retry-After: the second retry's backoff, half of min(8, 4 × 2).
    expect(budget.pauses).toEqual([20, 4]);
  });

  it('stops at once with the reason when the signal fires, in flight or while waiting to retry, and never sends again', async () => {
    const reason = new Error('the store took too long');
    const inFlight = new AbortController();
    let sent = 0;
    const hangingSend = (signal: AbortSignal) => {
      sent++;
      return new Promise<Answer>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    };
    const hanging = callWithRetries(
      timings,
      {
        label: 'GET /x',
        repeatable: true,
        signal: inFlight.signal,
        send: hangingSend,
      },
      logger,
    );
    setTimeout(() => inFlight.abort(reason), 5);
    await expect(hanging).rejects.toBe(reason);
    expect(sent).toBe(1);
    // A signal fired already: nothing is sent.
    await expect(
      callWithRetries(
        timings,
        { label: 'GET /x', repeatable: true, signal: inFlight.signal, send: hangingSend },
        logger,
      ),
    ).rejects.toBe(reason);
    expect(sent).toBe(1);

    const waiting = new AbortController();
    const slow = { ...timings, maxRetryAfterMs: 60_000 };
    const retried = callWithRetries(
      slow,
      {
        label: 'GET /x',
        repeatable: true,
        signal: waiting.signal,
        send: async () => {
          sent++;
          setTimeout(() => waiting.abort(reason), 5);
          return answer(429, { 'retry-after': '30' });
        },
      },
      logger,
    );
    await expect(retried).rejects.toBe(reason);
    expect(sent).toBe(2);
  });
});

import { RateBudget } from './rate-budget.js';
import type { BudgetClock } from './rate-budget.js';

/** Virtual time: a sleep moves the clock on by its length at once. */
function virtualClock(): BudgetClock & { at: number } {
  const clock = {
    at: 0,
    now: () => clock.at,
    sleep: async (ms: number) => {
      clock.at += ms;
    },
  };
  return clock;
}

describe('RateBudget', () => {
  it('lets the calls of a key through in the order they asked, (1 s + 100 ms)/rate apart, with no burst', async () => {
    const clock = virtualClock();
    const budget = new RateBudget(10, clock);
    const granted: Array<[string, number]> = [];
    await Promise.all(['a', 'b', 'c', 'd'].map((name) => budget.take(1).then(() => granted.push([name, clock.at]))));
    expect(granted).toEqual([
      ['a', 0],
      ['b', 110],
      ['c', 220],
      ['d', 330],
    ]);
  });

  it('keeps the keys apart: another connection does not wait', async () => {
    const clock = virtualClock();
    const budget = new RateBudget(2, clock);
    await budget.take(1);
    await budget.take(2);
    expect(clock.at).toBe(0);
    await budget.take(1);
    expect(clock.at).toBe(550);
  });

  it('a pause holds back every caller of the key until it ends, then they resume one interval apart; other keys go on', async () => {
    const clock = virtualClock();
    const budget = new RateBudget(10, clock);
    await budget.take(1);
    budget.pause(1, 2000);
    budget.pause(1, 500); // a shorter pause does not shorten the longer one
    const granted: number[] = [];
    await budget.take(2);
    expect(clock.at).toBe(0);
    await Promise.all([1, 2, 3].map(() => budget.take(1).then(() => granted.push(clock.at))));
    expect(granted).toEqual([2000, 2110, 2220]);
  });

  it('a caller whose signal fires leaves the line with its reason, and takes no slot', async () => {
    const budget = new RateBudget(1);
    await budget.take(1);
    const controller = new AbortController();
    const reason = new Error('the store took too long');
    const waiting = budget.take(1, controller.signal);
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    const aborted = new AbortController();
    aborted.abort(reason);
    await expect(budget.take(2, aborted.signal)).rejects.toBe(reason);
  });
});

import { StoreQueue } from './store-queue.js';

describe('StoreQueue', () => {
  it('spreads the workers over the groups, on a tie the one with most left, then the earlier, and ends when nothing is left', () => {
    const queue = new StoreQueue([
      { group: 'a', storeIds: ['a1', 'a2', 'a3'] },
      { group: 'b', storeIds: ['b1'] },
      { group: 'c', storeIds: ['c1', 'c2'] },
    ]);
    const taken = () => {
      const next = queue.take(0);
      if (next === null || !('store' in next)) throw new Error(`nothing to take: ${JSON.stringify(next)}`);
      return next.store;
    };
    const first = [taken(), taken(), taken()];
    expect(first.map((store) => store.storeId)).toEqual(['a1', 'c1', 'b1']);
    // One in work each: a has 2 left, c 1, b none.
    expect(taken().storeId).toBe('a2');
    queue.done(first[2]);
    // b has none left; c has one in work and one left, a two in work.
    expect(taken().storeId).toBe('c2');
    expect(taken().storeId).toBe('a3');
    expect(queue.take(0)).toEqual({ waitMs: Infinity });
    for (const store of [first[0], first[1]]) queue.done(store);
    expect(queue.take(0)).toEqual({ waitMs: Infinity });
  });

  it('a store given back is due again at its time, as its next attempt; the others are handed out meanwhile', async () => {
    const queue = new StoreQueue([{ group: 'a', storeIds: ['a1', 'a2'] }]);
    const first = queue.take(0);
    if (first === null || !('store' in first)) throw new Error('expected a store');
    const changed = queue.whenChanged();
    queue.done(first.store, 5000);
    await changed;
    expect(queue.take(10)).toEqual({ store: { group: 'a', storeId: 'a2', attempt: 1 } });
    expect(queue.take(10)).toEqual({ waitMs: 4990 });
    expect(queue.take(5000)).toEqual({ store: { group: 'a', storeId: 'a1', attempt: 2 } });
  });

  it('drops what is left of a group; the stores in work still end through done, and then nothing is left', () => {
    const queue = new StoreQueue([{ group: 'a', storeIds: ['a1', 'a2', 'a3'] }]);
    const first = queue.take(0);
    if (first === null || !('store' in first)) throw new Error('expected a store');
    expect(queue.drop('a').map((store) => store.storeId)).toEqual(['a2', 'a3']);
    expect(queue.take(0)).toEqual({ waitMs: Infinity });
    queue.done(first.store);
    expect(queue.take(0)).toBeNull();
  });
});

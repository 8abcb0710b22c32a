import { SingleFlight } from './single-flight.js';

describe('SingleFlight', () => {
  it('shares one run among the callers of a key while it is in flight, then starts afresh', async () => {
    const flights = new SingleFlight<number, number>();
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const fn = async () => {
      runs += 1;
      await gate;
      return runs;
    };

    const shared = [flights.run(1, fn), flights.run(1, fn), flights.run(1, fn)];
    const other = flights.run(2, fn);
    release();

    expect(await Promise.all(shared)).toEqual([2, 2, 2]);
    expect(await other).toBe(2);
    expect(await flights.run(1, fn)).toBe(3);
  });

  it('shares a failure too, and forgets it', async () => {
    const flights = new SingleFlight<string, string>();
    const failing = async () => {
      throw new Error('boom');
    };

    await expect(Promise.all([flights.run('a', failing), flights.run('a', failing)])).rejects.toThrow('boom');
    expect(await flights.run('a', async () => 'ok')).toBe('ok');
  });
});

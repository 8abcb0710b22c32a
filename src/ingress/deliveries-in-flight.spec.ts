import { jest } from '@jest/globals';
import { DeliveriesInFlight } from './deliveries-in-flight.js';

describe('DeliveriesInFlight', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  /** Whether `promise` has settled once pending callbacks ran. */
  async function settled(promise: Promise<void>): Promise<boolean> {
    let done = false;
    void promise.then(() => {
      done = true;
    });
    await Promise.resolve();
    await Promise.resolve();
    return done;
  }

  it('is quiet at once when no delivery is in flight, or when asked to wait 0 ms', async () => {
    const deliveries = new DeliveriesInFlight();
    expect(await settled(deliveries.quiet(10))).toBe(true);
    deliveries.begin();
    expect(await settled(deliveries.quiet(0))).toBe(true);
  });

  it('waits for the last delivery in flight to end', async () => {
    const deliveries = new DeliveriesInFlight();
    deliveries.begin();
    deliveries.begin();
    const quiet = deliveries.quiet(1000);
    deliveries.end();
    expect(await settled(quiet)).toBe(false);
    deliveries.end();
    expect(await settled(quiet)).toBe(true);
  });

  it('waits no longer than asked while deliveries keep arriving, and forgets a wait that timed out', async () => {
    const deliveries = new DeliveriesInFlight();
    deliveries.begin();
    const quiet = deliveries.quiet(10);
    jest.advanceTimersByTime(9);
    expect(await settled(quiet)).toBe(false);
    jest.advanceTimersByTime(1);
    expect(await settled(quiet)).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
    // The timed-out wait is not resumed again (nor kept) when the delivery ends.
    const again = deliveries.quiet(10);
    deliveries.end();
    expect(await settled(again)).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
  });
});

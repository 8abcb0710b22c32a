import { jest } from '@jest/globals';
import { WakeableSleep } from './wakeable-sleep.js';

/** Whether the promise has settled once the microtasks queued so far have run. */
async function settled(promise: Promise<void>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  await Promise.resolve();
  await Promise.resolve();
  return done;
}

describe('WakeableSleep', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('sleeps the time it is given when nothing wakes it', async () => {
    const alarm = new WakeableSleep();
    const sleep = alarm.sleep(1000);
    jest.advanceTimersByTime(999);
    expect(await settled(sleep)).toBe(false);
    jest.advanceTimersByTime(1);
    expect(await settled(sleep)).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('does not sleep at all after a wake that came before the sleep, until the wake is taken', async () => {
    const alarm = new WakeableSleep();
    alarm.wake();
    expect(await settled(alarm.sleep(1000))).toBe(true);
    expect(await settled(alarm.sleep(1000))).toBe(true);
    expect(jest.getTimerCount()).toBe(0);

    expect(alarm.takeWake()).toBe(true);
    expect(alarm.takeWake()).toBe(false);
    const sleep = alarm.sleep(1000);
    expect(await settled(sleep)).toBe(false);
    jest.advanceTimersByTime(1000);
    expect(await settled(sleep)).toBe(true);
  });

  it('ends a sleep under way at a wake, and clears its timer', async () => {
    const alarm = new WakeableSleep();
    const sleep = alarm.sleep(60_000);
    jest.advanceTimersByTime(10);
    expect(await settled(sleep)).toBe(false);
    alarm.wake();
    expect(await settled(sleep)).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
    expect(alarm.isWoken).toBe(true);
  });

  it('does not end a pause at a wake, only at its time', async () => {
    const alarm = new WakeableSleep();
    const pause = alarm.pause(500);
    alarm.wake();
    expect(await settled(pause)).toBe(false);
    jest.advanceTimersByTime(500);
    expect(await settled(pause)).toBe(true);
  });

  it('ends every sleep and pause under way at the stop, and every later one at once', async () => {
    const alarm = new WakeableSleep();
    const sleep = alarm.sleep(60_000);
    const pause = alarm.pause(60_000);
    alarm.stop();
    expect(alarm.isStopped).toBe(true);
    expect(await settled(sleep)).toBe(true);
    expect(await settled(pause)).toBe(true);
    expect(jest.getTimerCount()).toBe(0);

    expect(await settled(alarm.sleep(60_000))).toBe(true);
    expect(await settled(alarm.pause(60_000))).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
  });
});

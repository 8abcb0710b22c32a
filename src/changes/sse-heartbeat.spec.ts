import { jest } from '@jest/globals';
import { PassThrough } from 'node:stream';
import { SseHeartbeat } from './sse-heartbeat.js';

describe('SseHeartbeat', () => {
  beforeEach(() => jest.useFakeTimers({ now: 0 }));
  afterEach(() => jest.useRealTimers());

  const text = (stream: PassThrough) => (stream.read() as Buffer | null)?.toString() ?? '';

  it('writes a comment to each stream silent for the interval, not to one that wrote, and none once it ended', () => {
    const heartbeat = new SseHeartbeat(15_000);
    const [quiet, busy, gone] = [new PassThrough(), new PassThrough(), new PassThrough()];
    const beats = [quiet, busy, gone].map((stream) => heartbeat.follow(stream));
    jest.advanceTimersByTime(10_000);
    beats[1].wrote();
    beats[2].end();
    jest.advanceTimersByTime(5_000);
    expect([text(quiet), text(busy), text(gone)]).toEqual([':\n\n', '', '']);
    jest.advanceTimersByTime(10_000);
    expect([text(quiet), text(busy)]).toEqual(['', ':\n\n']);
    jest.advanceTimersByTime(5_000);
    expect([text(quiet), text(busy)]).toEqual([':\n\n', '']);
  });
});

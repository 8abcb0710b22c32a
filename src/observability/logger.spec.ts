import { prettyLogs } from './logger.js';

describe('prettyLogs', () => {
  it('is forced by json and pretty, whatever the descriptor is', () => {
    expect(prettyLogs('json', 1)).toBe(false);
    expect(prettyLogs('pretty', 1)).toBe(true);
  });

  it('follows the descriptor in auto mode: under jest stdout is a pipe or a terminal, and auto says the same', async () => {
    const { isatty } = await import('node:tty');
    expect(prettyLogs('auto', 1)).toBe(isatty(1));
    expect(prettyLogs('auto', 2)).toBe(isatty(2));
  });
});

/**
 * jest's node environment, plus a place where a test file's log lines wait
 * (test/support/quiet-logs.ts puts Nest's there): they are shown under a test that fails, or a hook
 * that fails, and dropped otherwise, so a passing run prints no framework log lines.
 */
import { TestEnvironment } from 'jest-environment-node';

/** The key under which the test file's global holds the lines (an array of strings). */
export const LOG_LINES = Symbol.for('menu-sync.test-log-lines');

/** Lines kept for one test: the newest, enough to see what led to a failure. */
const MAX_LINES = 2000;

export default class QuietLogsEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.lines = [];
    const lines = this.lines;
    this.global[LOG_LINES] = {
      push(line) {
        lines.push(line);
        if (lines.length > MAX_LINES) lines.splice(0, lines.length - MAX_LINES);
      },
    };
  }

  /** jest-circus calls this for every event of the run; lines seen since the last test belong to the next. */
  handleTestEvent(event) {
    if (event.name === 'test_done') {
      if (event.test.errors.length > 0) this.show(`while "${fullName(event.test)}" ran`);
      this.lines.length = 0;
    } else if (event.name === 'hook_failure') {
      this.show(`before the ${event.hook.type} hook failed`);
      this.lines.length = 0;
    }
  }

  show(when) {
    if (this.lines.length === 0) return;
    // The test file's console: jest prints it with that file's results.
    this.global.console.log(`Log lines ${when}:\n${this.lines.join('\n')}`);
  }
}

function fullName(test) {
  const names = [];
  for (let block = test; block && block.name !== 'ROOT_DESCRIBE_BLOCK'; block = block.parent) names.unshift(block.name);
  return names.join(' › ');
}

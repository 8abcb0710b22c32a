import { readFileSync } from 'node:fs';

/**
 * Counts the warnings and errors a server wrote to its log file, with the first of them. The daemon
 * logs pino JSON lines; for a plain-text log (`json: false`, the baseline) any line mentioning an
 * error counts as one.
 */
export function scanLog(file, { json = true } = {}) {
  const result = { warnings: 0, errors: 0, first: null };
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return result;
  }
  for (const line of text.split('\n')) {
    const warn = json && /"level":("warn"|40)/.test(line);
    const error = json ? /"level":("error"|"fatal"|50|60)/.test(line) : /error/i.test(line);
    if (warn) result.warnings++;
    if (error) result.errors++;
    if ((warn || error) && result.first === null) result.first = line.slice(0, 500);
  }
  return result;
}

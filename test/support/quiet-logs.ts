import { Logger, LoggerService } from '@nestjs/common';
import { inspect } from 'node:util';

/**
 * Nest's log lines of in-process code (migrations applied, the projector's lease, ...) go to the
 * buffer that config/jest-environment.js shows only under a failing test. A test that overrides
 * Nest's logger itself (to read the lines, or to silence them) still can.
 */
const lines = (globalThis as Record<symbol, { push(line: string): void } | undefined>)[
  Symbol.for('menu-sync.test-log-lines')
];

function text(value: unknown): string {
  return typeof value === 'string' ? value : inspect(value, { depth: 4, breakLength: Infinity });
}

function line(level: string, message: unknown, params: unknown[]): string {
  // Nest's Logger passes its context last; an error's stack, when given, comes before it.
  const context = params.length > 0 && typeof params[params.length - 1] === 'string' ? params.pop() : undefined;
  const rest = params.filter((param) => param !== undefined).map(text);
  return [level.toUpperCase(), context ? `[${context}]` : '', text(message), ...rest].filter(Boolean).join(' ');
}

const LEVELS = ['log', 'error', 'warn', 'debug', 'verbose', 'fatal'] as const;

function bufferedLogger(sink: { push(line: string): void }): LoggerService {
  return Object.fromEntries(
    LEVELS.map((level) => [level, (message: unknown, ...params: unknown[]) => sink.push(line(level, message, params))]),
  ) as unknown as LoggerService;
}

if (lines) Logger.overrideLogger(bufferedLogger(lines));

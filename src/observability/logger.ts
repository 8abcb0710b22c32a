import { isatty } from 'node:tty';
import { LoggerService } from '@nestjs/common';
import pino, { DestinationStream, Logger as Pino } from 'pino';
import pretty from 'pino-pretty';
import { requestContext } from './request-context.js';
import { REDACTED } from './redacted.js';

/** `/webhooks/{key}`: the key is a secret, so paths are logged with it redacted. */
export function redactPath(url: string | undefined): string | undefined {
  return url?.replace(/^\/webhooks\/[^/?#]*/, '/webhooks/[redacted]');
}

export type LogFormat = 'auto' | 'json' | 'pretty';

/** `auto`: human-readable lines on a terminal, JSON lines otherwise (a pipe, a file, a log collector). */
export function prettyLogs(format: LogFormat, fd: 1 | 2): boolean {
  return format === 'pretty' || (format === 'auto' && isatty(fd));
}

/**
 * Log lines to stdout (`fd` 1), or stderr (2) for commands whose stdout is their result: JSON, or
 * pino-pretty's lines for people (same fields, same redaction, formatted in-process).
 */
export function createRootLogger(level: string, sync = false, fd: 1 | 2 = 1, format: LogFormat = 'json'): Pino {
  const destination: DestinationStream = prettyLogs(format, fd)
    ? pretty({
        destination: fd,
        sync,
        colorize: isatty(fd),
        translateTime: 'SYS:HH:MM:ss.l',
        ignore: 'pid,hostname,service',
        messageFormat: '{if context}[{context}] {end}{msg}',
      })
    : pino.destination({ sync, fd });
  return pino(
    {
      level,
      base: { service: 'menu-sync' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      // Lines written while a request is handled carry its id (fields given to the line win).
      mixin: () => {
        const reqId = requestContext.getStore()?.reqId;
        return reqId === undefined ? {} : { reqId };
      },
      serializers: {
        err: pino.stdSerializers.err,
        req: (req: { method?: string; url?: string }) => ({ method: req.method, url: redactPath(req.url) }),
      },
      redact: {
        paths: [
          '*.authorization',
          '*.headers.authorization',
          '*.access_token',
          '*.refresh_token',
          '*.client_secret',
          '*.password',
          '*.key',
          '*.token',
        ],
        censor: REDACTED,
      },
    },
    destination,
  );
}

/** Nest's own start-up chatter (one line per module and route) is debug detail. */
const BOOTSTRAP_CONTEXTS = new Set([
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'NestFactory',
  'NestApplication',
]);

/** Nest's LoggerService on top of pino: context = class name, plus the current request id. */
export class PinoNestLogger implements LoggerService {
  constructor(private readonly root: Pino) {}

  log(message: unknown, ...rest: unknown[]) {
    const context = rest.at(-1);
    this.write(typeof context === 'string' && BOOTSTRAP_CONTEXTS.has(context) ? 'debug' : 'info', message, rest);
  }
  error(message: unknown, ...rest: unknown[]) {
    this.write('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]) {
    this.write('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]) {
    this.write('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]) {
    this.write('trace', message, rest);
  }
  fatal(message: unknown, ...rest: unknown[]) {
    this.write('fatal', message, rest);
  }

  private write(level: pino.Level, message: unknown, rest: unknown[]) {
    if (!this.root.isLevelEnabled(level)) return;
    const context = typeof rest.at(-1) === 'string' ? (rest.at(-1) as string) : undefined;
    const reqId = requestContext.getStore()?.reqId;
    const bindings: Record<string, unknown> = { context, reqId };
    if (message instanceof Error) {
      this.root[level]({ ...bindings, err: message }, message.message);
    } else if (typeof message === 'object' && message !== null) {
      const { msg, ...fields } = message as Record<string, unknown>;
      this.root[level](
        { ...bindings, ...fields },
        typeof msg === 'string' ? msg : typeof rest[0] === 'string' && rest.length > 1 ? rest[0] : '',
      );
    } else {
      const stack = level === 'error' && typeof rest[0] === 'string' && rest.length > 1 ? rest[0] : undefined;
      this.root[level]({ ...bindings, stack }, String(message));
    }
  }
}

import { LoggerService } from '@nestjs/common';
import pino, { Logger as Pino } from 'pino';
import { requestContext } from './request-context.js';

/** `/webhooks/{key}`: the key is a secret, so paths are logged with it redacted. */
export function redactPath(url: string | undefined): string | undefined {
  return url?.replace(/^\/webhooks\/[^/?#]*/, '/webhooks/[redacted]');
}

/** JSON log lines to stdout (`fd` 1), or stderr (2) for commands whose stdout is their result. */
export function createRootLogger(level: string, sync = false, fd: 1 | 2 = 1): Pino {
  return pino({
    level,
    base: { service: 'menu-sync' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    serializers: {
      err: pino.stdSerializers.err,
      req: (req: { method?: string; url?: string }) => ({ method: req.method, url: redactPath(req.url) }),
    },
    redact: {
      paths: ['*.authorization', '*.headers.authorization', '*.access_token', '*.refresh_token', '*.client_secret',
        '*.password', '*.key', '*.token'],
      censor: '[redacted]',
    },
  }, pino.destination({ sync, fd }));
}

/** Nest's own start-up chatter (one line per module and route) is debug detail. */
const BOOTSTRAP_CONTEXTS = new Set(['InstanceLoader', 'RoutesResolver', 'RouterExplorer', 'NestFactory', 'NestApplication']);

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
      this.root[level]({ ...bindings, ...fields }, typeof msg === 'string' ? msg : typeof rest[0] === 'string' && rest.length > 1 ? rest[0] : '');
    } else {
      const stack = level === 'error' && typeof rest[0] === 'string' && rest.length > 1 ? rest[0] : undefined;
      this.root[level]({ ...bindings, stack }, String(message));
    }
  }
}

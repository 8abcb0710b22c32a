import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type { Logger as Pino } from 'pino';

export interface RequestContext {
  reqId: string;
}

/** Carries the request id to every log line written while a request is handled. */
export const requestContext = new AsyncLocalStorage<RequestContext>();

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/** A request's id: its `X-Request-Id` when that is sane, else a fresh one. */
export function requestIdOf(header: string | string[] | undefined): string {
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID();
}

export interface CompletedRequest {
  reqId: string;
  method: string | undefined;
  route: string;
  status: number;
  ms: number;
}

/**
 * The `request completed` line of every request. At thousands of deliveries a second an info line
 * per success is a large share of the CPU: successes are logged at debug, refusals at info, server
 * errors at warn.
 */
export function logRequestCompleted(logger: Pino, request: CompletedRequest): void {
  const level = request.status >= 500 ? 'warn' : request.status >= 400 ? 'info' : 'debug';
  if (!logger.isLevelEnabled(level)) return;
  logger[level](
    {
      reqId: request.reqId,
      method: request.method,
      route: request.route,
      status: request.status,
      ms: Math.round(request.ms * 100) / 100,
    },
    'request completed',
  );
}

import { AsyncLocalStorage } from 'node:async_hooks';

export interface RequestContext {
  reqId: string;
}

/** Carries the request id to every log line written while a request is handled. */
export const requestContext = new AsyncLocalStorage<RequestContext>();

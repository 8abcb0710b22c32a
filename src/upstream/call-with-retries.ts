import type { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { NetworkFault } from './network-fault.js';
import { isTransientStatus, parseRetryAfter, retryDelay } from './retry-delay.js';
import type { CallBudget } from './rate-budget.js';
import { UpstreamUnavailableError } from './upstream.errors.js';
import type { UpstreamTimings } from './upstream-timings.js';

/** What a retried call needs to see of an answer. */
export interface Answer {
  status: number;
  headers: Headers;
}

export interface RetriedCall<T extends Answer> {
  /** Names the call in logs and errors: a method and a path, never a secret or a query string. */
  label: string;
  /** Sends once and reads the whole answer; `signal` fires at the timeout. */
  send(signal: AbortSignal): Promise<T>;
  /**
   * Whether a fault after the request may have reached the server (a timeout, a broken connection)
   * may be retried: only when doing it twice is harmless.
   */
  repeatable: boolean;
  /** Sees every HTTP status, and 0 for every network fault. */
  observe?(status: number): void;
  /** Every attempt waits for its turn here; a 429 pauses it for every caller. */
  budget?: CallBudget;
  /** The caller's own deadline: when it fires, the call stops at once with its reason, never retried. */
  signal?: AbortSignal;
}

/**
 * Sends until an answer that is not 429/5XX, with bounded attempts, full-jitter backoff and
 * `Retry-After`, each attempt in its turn of the budget. A 429 pauses the budget (every caller of
 * the connection) for its `Retry-After`, or for this caller's backoff when it names none. Throws
 * UpstreamUnavailableError when the attempts run out or a fault must not be repeated, and the
 * signal's reason when it fires.
 */
export async function callWithRetries<T extends Answer>(
  timings: UpstreamTimings,
  call: RetriedCall<T>,
  logger: Logger,
): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    const outcome = await attemptOnce(timings, call);
    const exhausted = attempt >= timings.attempts;
    if (outcome instanceof NetworkFault) {
      if (exhausted || (outcome.kind !== 'unsent' && !call.repeatable)) {
        throw new UpstreamUnavailableError(
          `${call.label}: ${outcome.message} (attempt ${attempt} of ${timings.attempts})`,
        );
      }
      await pause(logger, call, outcome.message, retryDelay(timings, attempt));
      continue;
    }
    if (!isTransientStatus(outcome.status)) return outcome;
    const retryAfterMs = parseRetryAfter(outcome.headers.get('retry-after'), timings.now());
    const delayMs = retryDelay(timings, attempt, retryAfterMs);
    if (outcome.status === 429)
      call.budget?.pause(retryAfterMs === undefined ? delayMs : Math.min(retryAfterMs, timings.maxRetryAfterMs));
    if (exhausted) {
      throw new UpstreamUnavailableError(
        `${call.label} answered ${outcome.status} ${attempt} times`,
        retryAfterMs === undefined ? undefined : Math.max(1, Math.ceil(retryAfterMs / 1000)),
      );
    }
    await pause(logger, call, `HTTP ${outcome.status}`, delayMs);
  }
}

async function attemptOnce<T extends Answer>(
  timings: UpstreamTimings,
  call: RetriedCall<T>,
): Promise<T | NetworkFault> {
  await call.budget?.take(call.signal);
  call.signal?.throwIfAborted();
  const timeout = AbortSignal.timeout(timings.timeoutMs);
  try {
    const answer = await call.send(call.signal === undefined ? timeout : AbortSignal.any([timeout, call.signal]));
    call.observe?.(answer.status);
    return answer;
  } catch (error) {
    call.signal?.throwIfAborted();
    const fault = NetworkFault.of(error);
    if (fault === undefined) throw error;
    call.observe?.(0);
    return fault;
  }
}

async function pause<T extends Answer>(
  logger: Logger,
  call: RetriedCall<T>,
  reason: string,
  delayMs: number,
): Promise<void> {
  logger.warn(`${call.label}: ${reason}; retrying in ${delayMs} ms`);
  try {
    await sleep(delayMs, undefined, { signal: call.signal });
  } catch (error) {
    call.signal?.throwIfAborted();
    throw error;
  }
}

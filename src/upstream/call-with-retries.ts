import type { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { NetworkFault } from './network-fault.js';
import { isTransientStatus, parseRetryAfter, retryDelay } from './retry-delay.js';
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
}

/**
 * Sends until an answer that is not 429/5XX, with bounded attempts, full-jitter backoff and
 * `Retry-After`. Throws UpstreamUnavailableError when the attempts run out or a fault must not be
 * repeated.
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
      await pause(logger, call.label, outcome.message, retryDelay(timings, attempt));
      continue;
    }
    if (!isTransientStatus(outcome.status)) return outcome;
    const retryAfterMs = parseRetryAfter(outcome.headers.get('retry-after'), timings.now());
    if (exhausted) {
      throw new UpstreamUnavailableError(
        `${call.label} answered ${outcome.status} ${attempt} times`,
        retryAfterMs === undefined ? undefined : Math.max(1, Math.ceil(retryAfterMs / 1000)),
      );
    }
    await pause(logger, call.label, `HTTP ${outcome.status}`, retryDelay(timings, attempt, retryAfterMs));
  }
}

async function attemptOnce<T extends Answer>(
  timings: UpstreamTimings,
  call: RetriedCall<T>,
): Promise<T | NetworkFault> {
  try {
    const answer = await call.send(AbortSignal.timeout(timings.timeoutMs));
    call.observe?.(answer.status);
    return answer;
  } catch (error) {
    const fault = NetworkFault.of(error);
    if (fault === undefined) throw error;
    call.observe?.(0);
    return fault;
  }
}

async function pause(logger: Logger, label: string, reason: string, delayMs: number): Promise<void> {
  logger.warn(`${label}: ${reason}; retrying in ${delayMs} ms`);
  await sleep(delayMs);
}

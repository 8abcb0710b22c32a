import { Injectable } from '@nestjs/common';
import { Webhook } from 'standardwebhooks';
import { parseRetryAfter } from './backoff.js';
import type { DeliveryOutcome, TargetAnswer } from './delivery.js';
import { responseHead } from './redact.js';

export interface HttpBatch {
  url: string;
  webhookId: string;
  /** The JSON body, exactly as signed. */
  body: string;
  secrets: string[];
  timeoutMs: number;
  /** Aborts the attempt (shutdown). */
  signal?: AbortSignal;
}

/**
 * POSTs one batch signed per Standard Webhooks (by the `standardwebhooks` library): one
 * `v1,<sig>` per secret, space-separated, so a receiver holding either secret of a rotation
 * verifies it. The timestamp is the attempt's; the id is the batch's.
 */
@Injectable()
export class HttpSinkClient {
  async send(batch: HttpBatch, now = new Date()): Promise<DeliveryOutcome> {
    const signature = batch.secrets
      .map((secret) => new Webhook(secret).sign(batch.webhookId, now, batch.body))
      .join(' ');
    let response: Response;
    let answer: TargetAnswer;
    try {
      response = await fetch(batch.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': batch.webhookId,
          'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
          'webhook-signature': signature,
          'user-agent': 'menu-sync',
        },
        body: batch.body,
        redirect: 'manual',
        signal: batch.signal
          ? AbortSignal.any([AbortSignal.timeout(batch.timeoutMs), batch.signal])
          : AbortSignal.timeout(batch.timeoutMs),
      });
      answer = { status: response.status, response: responseHead(await readBody(response)) };
    } catch (error) {
      const name = (error as Error)?.name;
      if (batch.signal?.aborted) return { kind: 'retry', error: 'interrupted by shutdown' };
      if (name === 'TimeoutError' || name === 'AbortError')
        return { kind: 'retry', error: `no answer within ${batch.timeoutMs} ms` };
      return { kind: 'retry', error: `network error: ${describeNetworkError(error)}` };
    }
    if (response.status >= 200 && response.status < 300) return { kind: 'ok', ...answer };
    if (response.status === 410)
      return { kind: 'gone', error: 'the target answered 410 Gone: the sink is disabled', ...answer };
    return {
      ...answer,
      kind: 'retry',
      error: `the target answered ${response.status}`,
      retryAfterMs: parseRetryAfter(response.headers.get('retry-after'), now.getTime()),
    };
  }
}

/** The whole body is read, so the connection can serve the next batch; a body cut short counts as empty. */
async function readBody(response: Response): Promise<Uint8Array> {
  return new Uint8Array(await response.arrayBuffer().catch(() => new ArrayBuffer(0)));
}

/** The cause's code and message, never the URL (it may hold credentials). */
function describeNetworkError(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  return cause?.code ?? cause?.message ?? (error as Error)?.message ?? 'unknown';
}

import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { Agent, buildConnector, request } from 'undici';
import { MetricsService } from '../../observability/metrics.service.js';
import { parseRetryAfter } from '../backoff.js';
import type { DeliveryOutcome, TargetAnswer } from '../delivery.js';
import { defaultPort, EgressGuard, EgressRefusedError } from '../egress/egress-guard.js';
import { responseHead } from '../redact.js';
import { webhookSignature } from './sink-secret.js';

export interface HttpBatch {
  /** The sink's id, for the egress metric. */
  sinkId: string;
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
 * POSTs one batch signed per Standard Webhooks: one `v1,<sig>` per secret, space-separated, so a
 * receiver holding either secret of a rotation verifies it. The timestamp is the attempt's; the id
 * is the batch's.
 *
 * Every connection goes through the egress guard (docs/reference.md §12): its connector resolves
 * the host, judges every address, and connects to the one judged (TLS still names the host).
 * Redirects are not followed: a 3XX is an answer like any other non-2XX.
 */
@Injectable()
export class HttpSinkClient implements OnModuleDestroy {
  private readonly agent: Agent;

  constructor(
    guard: EgressGuard,
    private readonly metrics: MetricsService,
  ) {
    const connect = buildConnector({});
    this.agent = new Agent({
      connect: (options, callback) => {
        const port = Number(options.port || defaultPort(options.protocol));
        guard.resolveAllowed(options.hostname, port).then(
          (address) => connect({ ...options, hostname: address }, callback),
          (error: Error) => callback(error, null),
        );
      },
    });
  }

  async onModuleDestroy(): Promise<void> {
    await this.agent.close();
  }

  async send(batch: HttpBatch, now = new Date()): Promise<DeliveryOutcome> {
    const timestamp = Math.floor(now.getTime() / 1000);
    const signature = batch.secrets
      .map((secret) => webhookSignature(secret, batch.webhookId, timestamp, batch.body))
      .join(' ');
    let answer: TargetAnswer & { status: number };
    let retryAfter: string | string[] | undefined;
    try {
      const response = await request(batch.url, {
        dispatcher: this.agent,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': batch.webhookId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signature,
          'user-agent': 'menu-sync',
        },
        body: batch.body,
        signal: batch.signal
          ? AbortSignal.any([AbortSignal.timeout(batch.timeoutMs), batch.signal])
          : AbortSignal.timeout(batch.timeoutMs),
      });
      answer = { status: response.statusCode, response: responseHead(await readBody(response.body)) };
      retryAfter = response.headers['retry-after'];
    } catch (error) {
      const name = (error as Error)?.name;
      if (batch.signal?.aborted) return { kind: 'retry', error: 'interrupted by shutdown' };
      if (error instanceof EgressRefusedError) {
        this.metrics.sinks.egressRefused({ id: batch.sinkId, kind: 'http' });
        return { kind: 'retry', error: error.message };
      }
      if (name === 'TimeoutError' || name === 'AbortError')
        return { kind: 'retry', error: `no answer within ${batch.timeoutMs} ms` };
      return { kind: 'retry', error: `network error: ${describeNetworkError(error)}` };
    }
    const status = answer.status;
    if (status >= 200 && status < 300) return { kind: 'ok', ...answer };
    if (status === 410) return { kind: 'gone', error: 'the target answered 410 Gone: the sink is disabled', ...answer };
    return {
      ...answer,
      kind: 'retry',
      error:
        status >= 300 && status < 400
          ? `the target answered ${status}, a redirect, which sinks do not follow`
          : `the target answered ${status}`,
      retryAfterMs: parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : (retryAfter ?? null), now.getTime()),
    };
  }
}

/** The whole body is read, so the connection can serve the next batch; a body cut short counts as empty. */
async function readBody(body: { arrayBuffer(): Promise<ArrayBuffer> }): Promise<Uint8Array> {
  return new Uint8Array(await body.arrayBuffer().catch(() => new ArrayBuffer(0)));
}

/** The error's code and message, never the URL (it may hold credentials). */
function describeNetworkError(error: unknown): string {
  const failure = error as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  return failure?.cause?.code ?? failure?.code ?? failure?.cause?.message ?? failure?.message ?? 'unknown';
}

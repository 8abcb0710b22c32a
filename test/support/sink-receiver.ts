import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { eventually } from './eventually.js';
import { api } from './http.js';

/** What the receiver does with one request: answer a status (with headers), or hang past the sender's timeout. */
export type ReceiverAction =
  { status: number; headers?: Record<string, string>; delayMs?: number; body?: string } | { hangMs: number };

export interface ReceivedBatch {
  webhookId: string;
  timestamp: string;
  signature: string;
  body: string;
  /** The body parsed and verified with the standardwebhooks library, or null when it did not verify. */
  verified: { data: any[] } | null;
  answered: number | 'hung';
  at: number;
}

/**
 * An HTTP sink target as a user would write one: it verifies each request with the
 * `standardwebhooks` library (any of its secrets), and keeps the newest change of each resource
 * from the batches it acknowledged (deduplicating by webhook-id). `script` decides the answers.
 */
export class SinkReceiver {
  readonly received: ReceivedBatch[] = [];
  readonly catalogue = new Map<string, any>();
  private readonly seenIds = new Set<string>();
  secrets: string[] = [];
  /**
   * Set while the sink is being created: its first delivery may arrive before the test has read the
   * secret from the creation's answer, and waits for it (up to 5 s) instead of being refused.
   */
  secretsPending = false;
  /** Answers for the next requests, in order; when empty, 204. */
  script: ReceiverAction[] = [];
  /** Every request answered this way while set (a target down for a stretch). */
  always?: ReceiverAction;
  /** Requests being handled now, and the most there ever were at once (one batch in flight per sink: 1). */
  inFlight = 0;
  maxInFlight = 0;
  private server?: Server;
  url = '';

  async start(port = 0, host = '127.0.0.1'): Promise<this> {
    this.server = createServer((request, response) => void this.handle(request, response));
    await new Promise<void>((resolve) => this.server!.listen(port, host, resolve));
    const name = host.includes(':') ? `[${host}]` : host;
    this.url = `http://${name}:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve) ?? resolve(undefined));
  }

  /** Acknowledged batches' changes in the order received. */
  get acknowledgedChanges(): any[] {
    return this.received
      .filter((batch) => typeof batch.answered === 'number' && batch.answered < 300 && batch.verified)
      .flatMap((batch) => batch.verified!.data);
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
    response.once('close', () => this.inFlight--);
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const headers = {
      'webhook-id': String(request.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(request.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(request.headers['webhook-signature'] ?? ''),
    };
    for (const deadline = Date.now() + 5000; this.secretsPending && Date.now() < deadline;)
      await new Promise((resolve) => setTimeout(resolve, 10));
    const verified = this.verify(body, headers);
    const action = this.always ?? this.script.shift() ?? { status: 204 };
    const batch: ReceivedBatch = {
      webhookId: headers['webhook-id'],
      timestamp: headers['webhook-timestamp'],
      signature: headers['webhook-signature'],
      body,
      verified,
      answered: 'hung',
      at: Date.now(),
    };
    this.received.push(batch);
    if ('hangMs' in action) {
      setTimeout(() => response.destroy(), action.hangMs).unref();
      return;
    }
    if (action.delayMs) await new Promise((resolve) => setTimeout(resolve, action.delayMs));
    const status = verified === null ? 400 : action.status;
    batch.answered = status;
    if (status >= 200 && status < 300 && !this.seenIds.has(batch.webhookId)) {
      this.seenIds.add(batch.webhookId);
      for (const change of verified!.data) {
        const key = `${change.type}/${change.id}`;
        const known = this.catalogue.get(key);
        if (known === undefined || known.seq < change.seq) this.catalogue.set(key, change);
      }
    }
    response.writeHead(status, action.headers ?? {}).end(action.body);
  }

  private verify(body: string, headers: Record<string, string>): { data: any[] } | null {
    for (const secret of this.secrets) {
      try {
        return new Webhook(secret).verify(body, headers) as { data: any[] };
      } catch {
        // try the next secret
      }
    }
    return null;
  }
}

/**
 * The sink's view (`GET /api/v1/sinks/{id}`) once it matches `expected`, waiting up to `timeoutMs`:
 * a receiver counts a batch when it answers, and the daemon moves the sink's cursor (its `lag`) only
 * once it has that answer, so a view read right after the receiver has everything may lag one batch.
 */
export async function settledSink(
  baseUrl: string,
  id: string,
  expected: Record<string, unknown>,
  timeoutMs = 10000,
): Promise<Record<string, unknown>> {
  return eventually(
    async () => {
      const view = (await api(baseUrl, `/api/v1/sinks/${id}`)).json.data;
      expect(view).toMatchObject(expected);
      return view;
    },
    timeoutMs,
    50,
  );
}

import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request the hub received for a sink, recorded whatever it answered. */
export interface HubRequest {
  webhookId: string;
  /** The body's changes when its Standard Webhooks signature verified with the sink's secret, else null. */
  changes: any[] | null;
  status: number;
  at: number;
}

/** A sink's target on the hub: its secret, what it answers, and every request it got. */
export class HubTarget {
  readonly requests: HubRequest[] = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Decides each answer (the request's number for this target, from 0); 204 when it answers undefined. */
  answer?: (n: number) => { status: number; headers?: Record<string, string> } | undefined;
  private secretValue = '';
  private told: () => void = () => undefined;
  /** Resolves once the secret is known: the sink may send its first batch before its creation's answer is read. */
  readonly secretKnown = new Promise<void>((resolve) => (this.told = resolve));

  constructor(readonly path: string) {}

  get secret(): string {
    return this.secretValue;
  }

  set secret(value: string) {
    this.secretValue = value;
    this.told();
  }
}

/**
 * One loopback HTTP server standing for the targets of many HTTP sinks (a path per sink, so that
 * hundreds of sinks need one listening socket): each request is verified with its sink's secret by
 * the `standardwebhooks` library and recorded with its answer. A request that does not verify is
 * answered 400 (the sink then retries, and the test sees it).
 */
export class SinkHub {
  private readonly targets = new Map<string, HubTarget>();
  private server?: Server;
  private base = '';
  /** Requests to a path no sink was given. */
  strays = 0;

  async start(): Promise<this> {
    this.server = createServer((request, response) => void this.handle(request, response));
    this.server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** A new target; its URL is `url(target)`, its secret set once the sink is made. */
  target(name: string): HubTarget {
    const target = new HubTarget(`/sinks/${name}`);
    this.targets.set(target.path, target);
    return target;
  }

  url(target: HubTarget): string {
    return `${this.base}${target.path}`;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => (this.server ? this.server.close(resolve) : resolve(undefined)));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const target = this.targets.get(request.url ?? '');
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    if (target === undefined) {
      this.strays++;
      response.writeHead(404).end();
      return;
    }
    target.maxInFlight = Math.max(target.maxInFlight, ++target.inFlight);
    response.once('close', () => target.inFlight--);
    const body = Buffer.concat(chunks).toString('utf8');
    await target.secretKnown;
    const headers = {
      'webhook-id': String(request.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(request.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(request.headers['webhook-signature'] ?? ''),
    };
    let changes: any[] | null;
    try {
      changes = (new Webhook(target.secret).verify(body, headers) as { data: any[] }).data;
    } catch {
      changes = null;
    }
    const planned = changes === null ? { status: 400 } : (target.answer?.(target.requests.length) ?? { status: 204 });
    target.requests.push({ webhookId: headers['webhook-id'], changes, status: planned.status, at: Date.now() });
    response.writeHead(planned.status, planned.headers ?? {}).end();
  }
}

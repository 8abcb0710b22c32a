import { mkdir, rename, writeFile } from 'node:fs/promises';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';

interface CatalogueChange {
  seq: number;
  type: string;
  id: string;
  op: 'upsert' | 'delete';
  resource: unknown;
}

/** Webhook-ids remembered for deduplication (a retried batch arrives under the same id). */
const SEEN_IDS = 10_000;

/**
 * The sandbox's own catalogue: an HTTP sink target in this process, as examples/catalogue-consumer
 * is one outside it. It verifies every batch (Standard Webhooks), skips a webhook-id it has seen,
 * keeps the newest change of each resource and writes the live resources to a JSON file.
 */
export class CatalogueReceiver {
  private readonly resources = new Map<string, CatalogueChange>();
  private readonly seen = new Set<string>();
  private webhook?: Webhook;
  private writing = Promise.resolve();

  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly file: string,
  ) {}

  static async start(dataDir: string): Promise<CatalogueReceiver> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const receiver = new CatalogueReceiver(
      server,
      `http://127.0.0.1:${port}/sandbox-catalogue`,
      path.resolve(dataDir, 'catalogue.json'),
    );
    server.on('request', (request, response) => void receiver.handle(request, response));
    return receiver;
  }

  useSecret(secret: string): void {
    this.webhook = new Webhook(secret);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
    await this.writing;
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    let batch: { data: CatalogueChange[] };
    try {
      if (this.webhook === undefined) throw new Error('no secret yet');
      batch = this.webhook.verify(
        Buffer.concat(chunks).toString('utf8'),
        request.headers as Record<string, string>,
      ) as typeof batch;
    } catch {
      response.writeHead(401).end();
      return;
    }
    const id = String(request.headers['webhook-id']);
    if (!this.seen.has(id)) {
      this.remember(id);
      for (const change of batch.data) {
        const key = `${change.type}/${change.id}`;
        if ((this.resources.get(key)?.seq ?? -1) < change.seq) this.resources.set(key, change);
      }
      await this.save();
    }
    response.writeHead(204).end();
  }

  private remember(id: string): void {
    this.seen.add(id);
    if (this.seen.size > SEEN_IDS) this.seen.delete(this.seen.values().next().value!);
  }

  /** The live resources by type, written whole and renamed into place. */
  private save(): Promise<void> {
    const catalogue: Record<string, unknown[]> = {};
    for (const change of this.resources.values()) {
      if (change.op === 'upsert') (catalogue[change.type] ??= []).push(change.resource);
    }
    const text = `${JSON.stringify({ updated_at: new Date().toISOString(), ...catalogue }, null, 2)}\n`;
    this.writing = this.writing.then(async () => {
      await mkdir(path.dirname(this.file), { recursive: true });
      await writeFile(`${this.file}.tmp`, text);
      await rename(`${this.file}.tmp`, this.file);
    });
    return this.writing;
  }
}

import { Logger } from '@nestjs/common';
import type { Logger as Pino } from 'pino';
import { SANDBOX_ACTOR } from '../audit/audit-actor.js';
import { AppConfig } from '../config/app-config.js';
import { startEmulator } from '../emulator/emulator.factory.js';
import type { RunningEmulator } from '../emulator/emulator.factory.js';
import { emulatorOptions } from '../emulator/emulator-options.js';
import { DEMO_USER_ID } from '../emulator/oauth/oauth-server.service.js';
import { DEMO_STORE_ID } from '../emulator/state/emulator-state.service.js';
import { PinoNestLogger } from '../observability/logger.js';
import { UpstreamSettings } from '../upstream/upstream-settings.js';
import type { EgressGuard } from '../sinks/egress/egress-guard.js';
import type { SinksService } from '../sinks/api/sinks.service.js';
import { CatalogueReceiver } from './catalogue-receiver.js';

/** A sandbox emulator retries failed deliveries soon: the daemon beside it is usually just starting or stopping. */
const SANDBOX_RETRY_SCHEDULE_MS = [1_000, 5_000, 30_000, 120_000, 600_000];
/** Each step of the connect flow; a SIGTERM during start-up waits at most this long. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * The zero-config sandbox (docs/reference.md §1, issue 7): the emulator in this process on a free loopback
 * port as the upstream, connected through the real OAuth flow once the daemon listens, so the
 * subscription and the first reconcile (which imports the demo menu) happen as they would with a
 * real platform.
 */
export class Sandbox {
  private readonly logger = new Logger(Sandbox.name);
  private catalogue?: CatalogueReceiver;

  private constructor(
    readonly emulator: RunningEmulator,
    readonly upstream: UpstreamSettings,
    private readonly apiToken: string | undefined,
  ) {}

  static async start(config: AppConfig, rootLogger: Pino): Promise<Sandbox> {
    const clientId = config.OAUTH_CLIENT_ID ?? 'demo-client';
    const clientSecret = config.OAUTH_CLIENT_SECRET ?? 'demo-secret';
    const emulator = await startEmulator(
      emulatorOptions({
        host: '127.0.0.1',
        port: 0,
        clientId,
        clientSecret,
        retryScheduleMs: SANDBOX_RETRY_SCHEDULE_MS,
      }),
      new PinoNestLogger(rootLogger.child({ component: 'emulator' })),
    );
    return new Sandbox(
      emulator,
      UpstreamSettings.emulator(config, emulator.url, [DEMO_STORE_ID], clientId, clientSecret),
      config.apiTokens.find((entry) => entry.role === 'admin')?.token,
    );
  }

  /** Follows the authorization code flow as a browser would: the daemon's /auth/connect → the emulator → the daemon's callback. */
  async connect(daemonUrl: string): Promise<void> {
    let location = `${daemonUrl}/auth/connect`;
    for (let hop = 0; hop < 3; hop++) {
      const headers: Record<string, string> =
        hop === 0 && this.apiToken !== undefined ? { Authorization: `Bearer ${this.apiToken}` } : {};
      const response = await fetch(location, {
        redirect: 'manual',
        headers,
        signal: AbortSignal.timeout(CONNECT_TIMEOUT_MS),
      });
      const next = response.headers.get('location');
      if (response.status >= 300 && response.status < 400 && next !== null) {
        location = new URL(next, location).toString();
        continue;
      }
      if (response.status !== 200)
        throw new Error(`the sandbox could not connect: ${response.status} at ${new URL(location).pathname}`);
      const { data } = (await response.json()) as { data: { id: number } };
      this.logger.log({
        msg: `sandbox connected (connection ${data.id}): the demo menu is being imported`,
        menu: `${daemonUrl}/api/v1/menu?owner_id=${DEMO_USER_ID}`,
        make_changes: [
          `curl -X POST ${this.emulator.url}/_emulator/products -H 'content-type: application/json' -d '{"attributes":{"title":"Soup of the day","base_cost":{"GBP":650}}}'`,
          `menu-sync emulator trigger product.updated --url ${this.emulator.url}`,
        ],
      });
      return;
    }
    throw new Error('the sandbox could not connect: too many redirects');
  }

  /**
   * The catalogue mirror in the sandbox (docs/reference.md §11): an in-process receiver as an http sink,
   * fed from the current state of the menu on; sinks of earlier sandbox runs are removed.
   */
  async startCatalogue(sinks: SinksService, egress: EgressGuard, dataDir: string): Promise<void> {
    this.catalogue = await CatalogueReceiver.start(dataDir);
    // Loopback for this receiver alone: the egress guard still refuses every other local address.
    const { hostname, port } = new URL(this.catalogue.url);
    egress.allowEndpoint(hostname, Number(port));
    const earlier: string[] = [];
    for await (const page of sinks.all({ limit: 1000, order: 'created', kind: 'http' })) {
      for (const sink of page)
        if (/^http:\/\/127\.0\.0\.1:\d+\/sandbox-catalogue$/.test(sink.url ?? '')) earlier.push(sink.id);
    }
    for (const id of earlier) await sinks.remove(id, SANDBOX_ACTOR);
    const { data } = await sinks.create({ kind: 'http', url: this.catalogue.url, batch_size: 500 }, SANDBOX_ACTOR);
    this.catalogue.useSecret(data.secret!);
    this.logger.log({
      msg: `sandbox catalogue: every menu change is pushed to ${this.catalogue.file}`,
      sink: data.id,
      catalogue: this.catalogue.file,
    });
  }

  async stop(): Promise<void> {
    await this.catalogue?.stop();
    await this.emulator.close();
  }
}

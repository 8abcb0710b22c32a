import { Logger } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Logger as Pino } from 'pino';
import { createHttpApp } from './app.factory.js';
import { limitHeapGrowth } from './common/heap-growth.js';
import { AppConfig } from './config/app-config.js';
import { openDatabase, OpenDatabase } from './database/database-target.js';
import { checkDatabaseTls, migrateDatabase } from './database/migrate.js';
import { assertDirectUrl } from './database/session-probe.js';
import { ConnectionRepository } from './connections/connection.repository.js';
import { Sandbox } from './sandbox/sandbox.js';
import { EgressGuard } from './sinks/egress/egress-guard.js';
import { SinksService } from './sinks/api/sinks.service.js';
import { UpstreamSettings } from './upstream/upstream-settings.js';

const SHUTDOWN_BUDGET_MS = 9500;

/** A running menu-sync: database (embedded or external), migrations, HTTP app, and in sandbox mode the emulator. */
export class Daemon {
  private readonly logger = new Logger(Daemon.name);

  private constructor(
    readonly app: NestFastifyApplication,
    readonly url: string,
    private readonly database: OpenDatabase,
    private readonly sandbox: Sandbox | null,
  ) {}

  static async start(config: AppConfig, rootLogger: Pino): Promise<Daemon> {
    const logger = new Logger(Daemon.name);
    limitHeapGrowth(config.HEAP_GROWTH_PERCENT);
    const database = await openDatabase(config);
    let sandbox: Sandbox | null = null;
    try {
      logger.log(
        database.embedded
          ? `database: embedded PostgreSQL under ${config.DATA_DIR}`
          : 'database: external (DATABASE_URL)',
      );
      if (!database.embedded) {
        // A refused certificate first, in one line; then a direct URL found pooled (exit 2).
        await checkDatabaseTls(database.url);
        await assertDirectUrl(database, config.DATABASE_DIRECT_URL !== undefined);
      }
      if (config.MIGRATIONS_RUN) await migrateDatabase(database.migrationUrl, config.DATABASE_POOL_SIZE);
      sandbox = config.sandbox
        ? await Sandbox.start(config, rootLogger).catch((error) => {
            logger.error({ msg: 'the sandbox emulator could not start: running without an upstream', err: error });
            return null;
          })
        : null;
      const upstream = sandbox?.upstream ?? UpstreamSettings.fromConfig(config);
      const app = await createHttpApp({ config, databaseUrl: database.url, logger: rootLogger, upstream });
      await app.listen({ port: config.PORT, host: config.HOST });
      const address = app.getHttpServer().address();
      const port = typeof address === 'object' && address ? address.port : config.PORT;
      config.bindPort(port);
      const host = config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST === '::' ? '::1' : config.HOST;
      const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
      logger.log(
        `menu-sync listening on ${url} (${
          sandbox !== null
            ? `sandbox: the built-in emulator at ${sandbox.emulator.url} is the upstream`
            : config.hasUpstream
              ? `upstream: ${config.UPSTREAM_BASE_URL}`
              : 'no upstream (the sandbox runs with the embedded database, or SANDBOX=true)'
        })`,
      );
      const daemon = new Daemon(app, url, database, sandbox);
      if (sandbox !== null) {
        await daemon
          .connectSandbox(sandbox)
          .catch((error) => logger.error({ msg: 'the sandbox could not connect to its emulator', err: error }));
      }
      return daemon;
    } catch (error) {
      await sandbox?.stop().catch(() => undefined);
      await database.close();
      throw error;
    }
  }

  /** A fresh emulator each start: connections to earlier ones are retired, and this one is connected. */
  private async connectSandbox(sandbox: Sandbox): Promise<void> {
    const retired = await this.app
      .get(ConnectionRepository)
      .retireSandboxesBut(sandbox.emulator.url, 'its sandbox emulator has stopped');
    if (retired > 0)
      this.logger.log(`sandbox: ${retired} connection(s) to earlier emulators marked reauthorization_required`);
    await sandbox
      .startCatalogue(this.app.get(SinksService), this.app.get(EgressGuard), this.app.get(AppConfig).DATA_DIR)
      .catch((error) => this.logger.error({ msg: 'the sandbox catalogue could not start', err: error }));
    await sandbox.connect(this.url);
  }

  /**
   * Graceful stop: the listener closes (in-flight requests finish, so every append they wait for
   * commits), then the modules shut down, then an embedded database stops.
   */
  async stop(): Promise<void> {
    const deadline = setTimeout(() => {
      this.logger.error('shutdown took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_BUDGET_MS);
    deadline.unref();
    try {
      await this.app.close();
    } finally {
      await this.sandbox
        ?.stop()
        .catch((error) => this.logger.warn({ msg: 'the sandbox emulator did not stop cleanly', err: error }));
      await this.database.close();
      clearTimeout(deadline);
    }
  }
}

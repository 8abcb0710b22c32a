import { Logger } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Logger as Pino } from 'pino';
import { createHttpApp } from './app.factory.js';
import { AppConfig } from './config/app-config.js';
import { openDatabase, OpenDatabase } from './database/database-target.js';
import { migrateDatabase } from './database/migrate.js';

const SHUTDOWN_BUDGET_MS = 9500;

/** A running menu-sync: database (embedded or external), migrations, HTTP app. */
export class Daemon {
  private readonly logger = new Logger(Daemon.name);

  private constructor(
    readonly app: NestFastifyApplication,
    readonly url: string,
    private readonly database: OpenDatabase,
  ) {}

  static async start(config: AppConfig, rootLogger: Pino): Promise<Daemon> {
    const logger = new Logger(Daemon.name);
    const database = await openDatabase(config);
    try {
      logger.log(database.embedded ? `database: embedded PostgreSQL under ${config.DATA_DIR}` : 'database: external (DATABASE_URL)');
      if (config.MIGRATIONS_RUN) await migrateDatabase(database.url, config.DATABASE_POOL_SIZE);
      const app = await createHttpApp({ config, databaseUrl: database.url, logger: rootLogger });
      await app.listen({ port: config.PORT, host: config.HOST });
      const address = app.getHttpServer().address();
      const port = typeof address === 'object' && address ? address.port : config.PORT;
      config.bindPort(port);
      const url = `http://${config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST}:${port}`;
      logger.log(`menu-sync listening on ${url} (upstream: ${config.hasUpstream ? config.UPSTREAM_BASE_URL : 'none configured'})`);
      return new Daemon(app, url, database);
    } catch (error) {
      await database.close();
      throw error;
    }
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
      await this.database.close();
      clearTimeout(deadline);
    }
  }
}

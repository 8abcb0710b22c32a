import { AppConfig } from '../config/app-config.js';
import { withRootCert } from './database-tls.js';
import { EmbeddedPostgres } from './embedded-postgres.js';

export interface OpenDatabase {
  url: string;
  /** Where sessions go (DATABASE_DIRECT_URL, or `url`): leases, LISTEN, one-shot commands. */
  directUrl: string;
  /** Where migrations run: DATABASE_MIGRATION_URL, or `directUrl`. */
  migrationUrl: string;
  embedded: boolean;
  close(): Promise<void>;
}

/**
 * DATABASE_URL when set (with DATABASE_SSL_ROOT_CERT as its CA unless it names one); otherwise an
 * embedded PostgreSQL under DATA_DIR, started here — or, with `attach` (commands run beside a
 * daemon), the one the daemon already runs there.
 */
export async function openDatabase(config: AppConfig, { attach = false } = {}): Promise<OpenDatabase> {
  if (config.DATABASE_URL !== undefined) {
    const url = withRootCert(config.DATABASE_URL, config.DATABASE_SSL_ROOT_CERT);
    const directUrl =
      config.DATABASE_DIRECT_URL === undefined
        ? url
        : withRootCert(config.DATABASE_DIRECT_URL, config.DATABASE_SSL_ROOT_CERT);
    const migrationUrl =
      config.DATABASE_MIGRATION_URL === undefined
        ? directUrl
        : withRootCert(config.DATABASE_MIGRATION_URL, config.DATABASE_SSL_ROOT_CERT);
    return { url, directUrl, migrationUrl, embedded: false, close: async () => undefined };
  }
  const running = attach ? await EmbeddedPostgres.running(config.DATA_DIR) : null;
  if (running !== null)
    return { url: running, directUrl: running, migrationUrl: running, embedded: true, close: async () => undefined };
  const embedded = new EmbeddedPostgres(config.DATA_DIR);
  try {
    const url = await embedded.start();
    return { url, directUrl: url, migrationUrl: url, embedded: true, close: () => embedded.stop() };
  } catch (error) {
    await embedded.stop().catch(() => undefined);
    throw error;
  }
}

import { AppConfig } from '../config/app-config.js';
import { EmbeddedPostgres } from './embedded-postgres.js';

export interface OpenDatabase {
  url: string;
  /** Where sessions go (DATABASE_DIRECT_URL, or `url`): leases, LISTEN, migrations, one-shot commands. */
  directUrl: string;
  embedded: boolean;
  close(): Promise<void>;
}

/**
 * DATABASE_URL when set; otherwise an embedded PostgreSQL under DATA_DIR, started here — or, with
 * `attach` (commands run beside a daemon), the one the daemon already runs there.
 */
export async function openDatabase(config: AppConfig, { attach = false } = {}): Promise<OpenDatabase> {
  if (config.DATABASE_URL !== undefined) {
    const directUrl = config.DATABASE_DIRECT_URL ?? config.DATABASE_URL;
    return { url: config.DATABASE_URL, directUrl, embedded: false, close: async () => undefined };
  }
  const running = attach ? await EmbeddedPostgres.running(config.DATA_DIR) : null;
  if (running !== null) return { url: running, directUrl: running, embedded: true, close: async () => undefined };
  const embedded = new EmbeddedPostgres(config.DATA_DIR);
  try {
    const url = await embedded.start();
    return { url, directUrl: url, embedded: true, close: () => embedded.stop() };
  } catch (error) {
    await embedded.stop().catch(() => undefined);
    throw error;
  }
}

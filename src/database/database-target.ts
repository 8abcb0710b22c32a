import { AppConfig } from '../config/app-config.js';
import { EmbeddedPostgres } from './embedded-postgres.js';

export interface OpenDatabase {
  url: string;
  embedded: boolean;
  close(): Promise<void>;
}

/**
 * DATABASE_URL when set; otherwise an embedded PostgreSQL under DATA_DIR, started here — or, with
 * `attach` (commands run beside a daemon), the one the daemon already runs there.
 */
export async function openDatabase(config: AppConfig, { attach = false } = {}): Promise<OpenDatabase> {
  if (config.DATABASE_URL !== undefined) {
    return { url: config.DATABASE_URL, embedded: false, close: async () => undefined };
  }
  const running = attach ? await EmbeddedPostgres.running(config.DATA_DIR) : null;
  if (running !== null) return { url: running, embedded: true, close: async () => undefined };
  const embedded = new EmbeddedPostgres(config.DATA_DIR);
  try {
    const url = await embedded.start();
    return { url, embedded: true, close: () => embedded.stop() };
  } catch (error) {
    await embedded.stop().catch(() => undefined);
    throw error;
  }
}

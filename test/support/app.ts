import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config/app-config.js';
import { Daemon } from '../../src/daemon.js';
import { createRootLogger } from '../../src/observability/logger.js';
import { createTestDatabase, TestDatabase } from './database.js';

export const TEST_WEBHOOK_KEY = 'test-webhook-key-0123456789abcdef';
export const TEST_API_TOKEN = 'test-api-token-0123456789abcdef';

export interface TestApp {
  url: string;
  daemon: Daemon;
  database: TestDatabase;
  close(): Promise<void>;
}

/** The real daemon (migrations, Fastify, every module) on a fresh database and a free port. */
export async function startTestApp(env: Record<string, string> = {}): Promise<TestApp> {
  const database = await createTestDatabase();
  const config = loadConfig({
    DATABASE_URL: database.url,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    WEBHOOK_KEYS: TEST_WEBHOOK_KEY,
    API_TOKENS: TEST_API_TOKEN,
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...env,
  });
  const daemon = await Daemon.start(config, createRootLogger(config.LOG_LEVEL, true));
  return {
    url: daemon.url,
    daemon,
    database,
    close: async () => {
      await daemon.stop();
      await database.drop();
    },
  };
}

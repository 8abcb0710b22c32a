import { loadConfig } from '../config/app-config.js';
import { openDatabase } from './database-target.js';

/** Which URL the daemon and its migrations use (docs/reference.md §13, Least privilege and TLS). */
describe('openDatabase with DATABASE_URL', () => {
  const base = {
    DATABASE_URL: 'postgres://app:a@127.0.0.1:5432/menu_sync?sslmode=verify-full',
    TOKEN_ENCRYPTION_KEY: 'A'.repeat(43) + '=',
  };

  it('migrates on DATABASE_URL when no DATABASE_MIGRATION_URL is set', async () => {
    const database = await openDatabase(loadConfig(base));
    expect([database.url, database.migrationUrl, database.embedded]).toEqual([
      base.DATABASE_URL,
      base.DATABASE_URL,
      false,
    ]);
  });

  it('migrates on DATABASE_MIGRATION_URL, and gives both DATABASE_SSL_ROOT_CERT unless a URL names its own CA', async () => {
    const config = loadConfig({
      ...base,
      DATABASE_MIGRATION_URL: 'postgres://owner:o@127.0.0.1:5432/menu_sync?sslrootcert=%2Fowner-ca.pem',
      DATABASE_SSL_ROOT_CERT: '/etc/menu-sync/ca.pem',
    });
    const database = await openDatabase(config);
    expect(database.url).toBe(
      'postgres://app:a@127.0.0.1:5432/menu_sync?sslmode=verify-full&sslrootcert=%2Fetc%2Fmenu-sync%2Fca.pem',
    );
    expect(database.migrationUrl).toBe('postgres://owner:o@127.0.0.1:5432/menu_sync?sslrootcert=%2Fowner-ca.pem');
  });

  it('masks DATABASE_MIGRATION_URL in the configuration it logs', () => {
    const config = loadConfig({ ...base, DATABASE_MIGRATION_URL: 'postgres://owner:secret@127.0.0.1/menu_sync' });
    expect(config.dump().DATABASE_MIGRATION_URL).toBe('********');
  });
});
